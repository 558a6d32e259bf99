//! The signed JWT a machine client authenticates with at the token
//! endpoint (`private_key_jwt`, RFC 7523), signed with `ring`.
//!
//! rmcp's own signer (feature `auth-client-credentials-jwt`) needs
//! `jsonwebtoken` with aws-lc-rs, whose licence this workspace does not
//! take and whose crypto provider would sit beside ring's; this one uses
//! the ring the workspace already has.

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, RSA_PKCS1_SHA256, RsaKeyPair};
use serde_json::json;

use crate::spec::SigningAlgorithm;

/// The DER inside a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
fn pkcs8_der(pem: &str) -> Result<Vec<u8>, String> {
    let pem = pem.trim();
    if pem.contains("BEGIN EC PRIVATE KEY") || pem.contains("BEGIN RSA PRIVATE KEY") {
        return Err("the key is not PKCS#8: convert it with `openssl pkcs8 -topk8 -nocrypt`".into());
    }
    let body: String =
        pem.lines().filter(|line| !line.starts_with("-----")).flat_map(|line| line.trim().chars()).collect();
    if !pem.contains("BEGIN PRIVATE KEY") || body.is_empty() {
        return Err("expected a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----)".into());
    }
    base64::engine::general_purpose::STANDARD.decode(body).map_err(|_| "the PEM's body is not base64".into())
}

/// Check that `pem` is a key `algorithm` can sign with.
pub(crate) fn check_key(pem: &str, algorithm: SigningAlgorithm) -> Result<(), String> {
    let der = pkcs8_der(pem)?;
    match algorithm {
        SigningAlgorithm::Es256 => {
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &SystemRandom::new())
                .map(|_| ())
                .map_err(|e| format!("not a P-256 key for ES256 ({e})"))
        }
        SigningAlgorithm::Rs256 => {
            RsaKeyPair::from_pkcs8(&der).map(|_| ()).map_err(|e| format!("not an RSA key for RS256 ({e})"))
        }
    }
}

/// A client assertion for `client_id` to present to the authorization
/// server `audience` (its issuer), valid for five minutes.
pub(crate) fn client_assertion(
    client_id: &str,
    audience: &str,
    pem: &str,
    algorithm: SigningAlgorithm,
    now: u64,
) -> Result<String, String> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut jti = [0u8; 16];
    getrandom::fill(&mut jti).map_err(|e| e.to_string())?;
    let header = json!({"alg": algorithm.as_str(), "typ": "JWT"});
    let claims = json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 300,
        "jti": hex::encode(jti),
    });
    let signing_input = format!("{}.{}", b64.encode(header.to_string()), b64.encode(claims.to_string()));
    let der = pkcs8_der(pem)?;
    let rng = SystemRandom::new();
    let signature = match algorithm {
        SigningAlgorithm::Es256 => {
            let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
                .map_err(|e| format!("the private key: {e}"))?;
            pair.sign(&rng, signing_input.as_bytes()).map_err(|e| format!("signing: {e}"))?.as_ref().to_vec()
        }
        SigningAlgorithm::Rs256 => {
            let pair = RsaKeyPair::from_pkcs8(&der).map_err(|e| format!("the private key: {e}"))?;
            let mut signature = vec![0u8; pair.public().modulus_len()];
            pair.sign(&RSA_PKCS1_SHA256, &rng, signing_input.as_bytes(), &mut signature)
                .map_err(|e| format!("signing: {e}"))?;
            signature
        }
    };
    Ok(format!("{signing_input}.{}", b64.encode(signature)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, KeyPair as _, UnparsedPublicKey};

    #[test]
    fn an_es256_assertion_verifies_with_the_public_key_and_names_the_client_and_issuer() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        check_key(&pem, SigningAlgorithm::Es256).unwrap();
        let jwt = client_assertion("client-1", "https://as.example", &pem, SigningAlgorithm::Es256, 1000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims: serde_json::Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some("client-1"), Some("client-1")));
        assert_eq!(claims["aud"], "https://as.example");
        assert_eq!(claims["exp"], 1300);
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref());
        public
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &b64.decode(parts[2]).unwrap())
            .expect("the signature verifies");
        assert!(check_key(&pem, SigningAlgorithm::Rs256).is_err(), "an EC key cannot sign RS256");
        assert!(check_key("not a key", SigningAlgorithm::Es256).unwrap_err().contains("PKCS#8"));
    }
}
