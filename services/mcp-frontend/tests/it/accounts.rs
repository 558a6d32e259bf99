//! Connecting an account through the console over real HTTP (issue 41):
//! the fake bridge of [`crate::console`] also answers the accounts subject
//! (`codemode.v1.accounts`) as the contract says, with values meant to
//! break the page. Checks the login's way back to a connect link (and
//! nowhere else), the connect cookie and what the bridge is told of the
//! browser, the only redirect (the bridge's http(s) URL), the callback's
//! binding to the browser and that it never shows the code, the accounts
//! page with its Disconnect form, and the operations view's counts.
//! Whether a flow is someone else's, used or expired is the real bridge's
//! to decide (its tests, and `accounts_browser` in the cli's tests).

use code_mode_proto::{AccountInfo, AccountsReply, AccountsRequest, WireError};
use reqwest::header::LOCATION;
use sha2::{Digest, Sha256};

use crate::console::{HOSTILE, assert_console_headers, csrf_in, serve, set_cookie};

/// What a code looks like here: it must never be shown.
const CODE: &str = "c0de-SECRET-9f8e";

/// The fake bridge's accounts: flow `f-alice` is alice's, `f-evil` gets a
/// `javascript:` URL; a callback finishes only with the state and the
/// browser of an earlier Begin.
pub(crate) async fn bridge(
    request: AccountsRequest,
    earlier: Vec<AccountsRequest>,
) -> Result<AccountsReply, WireError> {
    Ok(match request {
        AccountsRequest::Begin { flow, viewer, .. } if flow == "f-alice" && viewer == "alice" => {
            AccountsReply::Redirect { url: "https://as.example/authorize?client_id=c&state=s-1".into() }
        }
        AccountsRequest::Begin { flow, .. } if flow == "f-evil" => {
            AccountsReply::Redirect { url: "javascript:alert(1)".into() }
        }
        AccountsRequest::Begin { .. } => {
            AccountsReply::Refused { reason: format!("this link was issued to another identity {HOSTILE}") }
        }
        AccountsRequest::Finish { state, browser, .. } => {
            let began = earlier.iter().any(|r| matches!(r, AccountsRequest::Begin { browser: b, .. } if *b == browser));
            if state == "s-1" && began {
                AccountsReply::Connected {
                    server: "https://notes.example/mcp".into(),
                    subject: format!("alice{HOSTILE}"),
                }
            } else {
                AccountsReply::Refused { reason: "this browser did not begin this flow".into() }
            }
        }
        AccountsRequest::List { identity } => AccountsReply::Accounts {
            accounts: vec![AccountInfo {
                server: format!("https://notes.example/{identity}"),
                subject: HOSTILE.into(),
                scopes: vec!["notes.read".into()],
                expires_at: Some(86_400),
            }],
        },
        AccountsRequest::Disconnect { .. } => AccountsReply::Disconnected { revoked: true },
        AccountsRequest::Counts => {
            AccountsReply::Counts { servers: vec![(format!("https://notes.example{HOSTILE}"), 2)] }
        }
    })
}

#[tokio::test]
async fn a_connect_link_opened_before_logging_in_goes_to_the_login_page_and_back_to_itself_and_nowhere_else() {
    let served = serve(true, true).await;
    let answer = served.get("/console/connect/f-alice", None).await;
    assert_eq!(answer.status(), 303);
    assert_eq!(answer.headers()[LOCATION], "/console/login?next=%2Fconsole%2Fconnect%2Ff-alice");
    assert_console_headers(answer.headers());
    assert!(served.accounts.lock().unwrap().is_empty(), "nothing is asked of the bridge before the login");

    let form = served.get("/console/login?next=%2Fconsole%2Fconnect%2Ff-alice", None).await;
    let (login, _) = set_cookie(form.headers(), "codemode_console_login").unwrap();
    let page = form.text().await.unwrap();
    assert!(page.contains("name=\"next\" value=\"/console/connect/f-alice\""), "{page}");
    let csrf = csrf_in(&page);
    let cookie = format!("codemode_console_login={login}");
    let log_in = |next: &str| {
        let body = format!("csrf={csrf}&token={}&next={next}", served.alice);
        let cookie = cookie.clone();
        let served = &served;
        async move { served.post("/console/login", Some(&cookie), None, &body).await }
    };
    // A page of the console's own goes on to the link (a 303 would leave
    // the site in a chain begun by the form's POST, which the CSP's
    // form-action 'self' stops), and sets the session cookie.
    let back = log_in("%2Fconsole%2Fconnect%2Ff-alice").await;
    assert_eq!(back.status(), 200);
    assert!(set_cookie(back.headers(), "codemode_console").is_some_and(|(v, _)| v == served.alice));
    let page = back.text().await.unwrap();
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"0; url=/console/connect/f-alice\">"), "{page}");
    for elsewhere in [
        "https%3A%2F%2Fevil.example%2F",
        "%2F%2Fevil.example",
        "%2Fconsole%2Foperations",
        "%2Fconsole%2Fconnect%2Fcallback",
    ] {
        let answer = log_in(elsewhere).await;
        assert_eq!(answer.status(), 303, "{elsewhere}");
        assert_eq!(answer.headers()[LOCATION], "/console", "{elsewhere}: only a connect link is a way back");
    }
    // A page asking to go back elsewhere offers no way back.
    let page = served.get("/console/login?next=https%3A%2F%2Fevil.example", None).await.text().await.unwrap();
    assert!(!page.contains("name=\"next\"") && !page.contains("evil.example"), "{page}");
}

#[tokio::test]
async fn a_connect_link_sets_the_lax_connect_cookie_tells_the_bridge_its_hash_and_sends_the_browser_only_to_the_bridges_http_url()
 {
    let served = serve(true, true).await;
    let alice = format!("codemode_console={}", served.alice);
    let answer = served.get("/console/connect/f-alice", Some(&alice)).await;
    assert_eq!(answer.status(), 303);
    assert_eq!(answer.headers()[LOCATION], "https://as.example/authorize?client_id=c&state=s-1");
    assert_console_headers(answer.headers());
    let (value, header) = set_cookie(answer.headers(), "codemode_connect").expect("the connect cookie");
    assert_eq!(value.len(), 64);
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/console/connect", "Max-Age="] {
        assert!(header.contains(flag), "{flag} missing from {header}");
    }
    let begun = served.accounts.lock().unwrap().clone();
    let expected = AccountsRequest::Begin {
        flow: "f-alice".into(),
        viewer: "alice".into(),
        browser: hex::encode(Sha256::digest(value.as_bytes())),
        redirect_uri: format!("{}/console/connect/callback", served.base),
    };
    assert_eq!(begun, [expected], "the bridge hears the hash of the cookie, never the cookie");

    // A second link in the same browser keeps its cookie (a first flow's
    // callback still finds it).
    let both = format!("{alice}; codemode_connect={value}");
    let again = served.get("/console/connect/f-alice", Some(&both)).await;
    assert_eq!(again.status(), 303);
    assert!(set_cookie(again.headers(), "codemode_connect").is_none());

    // Bob opening alice's link: the bridge refuses, the page says why, escaped.
    let bob = format!("codemode_console={}", served.bob);
    let refused = served.get("/console/connect/f-alice", Some(&bob)).await;
    assert_eq!(refused.status(), 403);
    assert!(refused.headers().get(LOCATION).is_none());
    let page = refused.text().await.unwrap();
    assert!(page.contains("issued to another identity") && !page.contains("<script"), "{page}");

    // A bridge's URL that is not http(s) is never followed.
    let evil = served.get("/console/connect/f-evil", Some(&alice)).await;
    assert_eq!(evil.status(), 502);
    assert!(evil.headers().get(LOCATION).is_none());
    // Nor is a flow id that is not one.
    let odd = served.get("/console/connect/a.b", Some(&alice)).await;
    assert_eq!(odd.status(), 404);
}

#[tokio::test]
async fn the_callback_finishes_only_with_the_browsers_connect_cookie_and_never_shows_the_code() {
    let served = serve(true, true).await;
    let alice = format!("codemode_console={}", served.alice);
    let begun = served.get("/console/connect/f-alice", Some(&alice)).await;
    let (value, _) = set_cookie(begun.headers(), "codemode_connect").unwrap();
    let callback = format!("/console/connect/callback?code={CODE}&state=s-1&iss=https%3A%2F%2Fas.example");
    // No console cookie: the authorization server's redirect carries only
    // the Lax connect cookie.
    let done = served.get(&callback, Some(&format!("codemode_connect={value}"))).await;
    assert_eq!(done.status(), 200);
    assert_console_headers(done.headers());
    let page = done.text().await.unwrap();
    assert!(
        page.contains("Connected to <strong>https://notes.example/mcp</strong> as <strong>alice&quot;&gt;"),
        "{page}"
    );
    assert!(page.contains("return to your client"), "{page}");
    assert!(!page.contains(CODE) && !page.contains("<script"), "{page}");
    let finish = served.accounts.lock().unwrap().last().cloned().unwrap();
    let AccountsRequest::Finish { code, iss, .. } = finish else { panic!("{finish:?}") };
    assert_eq!((code.as_str(), iss.as_deref()), (CODE, Some("https://as.example")));

    for (cookie, says) in [
        (None, "did not begin this connection"),
        (Some(format!("codemode_connect={}", "0".repeat(64))), "this browser did not begin this flow"),
    ] {
        let answer = served.get(&callback, cookie.as_deref()).await;
        assert_eq!(answer.status(), 400);
        let page = answer.text().await.unwrap();
        assert!(page.contains(says) && !page.contains(CODE), "{page}");
    }
    let denied = served
        .get("/console/connect/callback?error=access_denied&error_description=%3Cscript%3Ex%3C%2Fscript%3E", None)
        .await;
    assert_eq!(denied.status(), 400);
    let page = denied.text().await.unwrap();
    assert!(page.contains("access_denied") && page.contains("&lt;script&gt;") && !page.contains("<script"), "{page}");
    let no_state = served.get(&format!("/console/connect/callback?code={CODE}"), None).await;
    assert_eq!(no_state.status(), 400);
    assert!(!no_state.text().await.unwrap().contains(CODE));
}

#[tokio::test]
async fn the_accounts_page_lists_the_viewers_accounts_escaped_and_disconnects_one_by_a_csrf_form() {
    let served = serve(true, true).await;
    assert_eq!(served.get("/console/accounts", None).await.status(), 303, "logged in only");
    let bob = format!("codemode_console={}", served.bob);
    let page = served.get("/console/accounts", Some(&bob)).await;
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("https://notes.example/bob") && page.contains("notes.read"), "{page}");
    assert!(page.contains("1970-01-02 00:00:00 UTC") && !page.contains("<script"), "{page}");
    assert_eq!(served.accounts.lock().unwrap().last(), Some(&AccountsRequest::List { identity: "bob".into() }));
    let csrf = csrf_in(&page);
    let server = "server=https%3A%2F%2Fnotes.example%2Fbob";
    let forged = served.post("/console/accounts/disconnect", Some(&bob), None, server).await;
    assert_eq!(forged.status(), 403, "no csrf");
    let other_site = served
        .post(
            "/console/accounts/disconnect",
            Some(&bob),
            Some("https://evil.example"),
            &format!("{server}&csrf={csrf}"),
        )
        .await;
    assert_eq!(other_site.status(), 403);
    let done = served.post("/console/accounts/disconnect", Some(&bob), None, &format!("{server}&csrf={csrf}")).await;
    assert_eq!(done.status(), 200);
    assert!(done.text().await.unwrap().contains("revoked at the authorization server"));
    let asked = served.accounts.lock().unwrap().last().cloned();
    let expected = AccountsRequest::Disconnect { identity: "bob".into(), server: "https://notes.example/bob".into() };
    assert_eq!(asked, Some(expected), "bob disconnects only his own");
}

#[tokio::test]
async fn the_operations_view_counts_connected_identities_per_server_and_shows_no_token() {
    let served = serve(true, true).await;
    let alice = format!("codemode_console={}", served.alice);
    let page = served.get("/console/operations", Some(&alice)).await.text().await.unwrap();
    assert!(page.contains("Connected accounts") && page.contains("<td>2</td>"), "{page}");
    assert!(page.contains("https://notes.example&quot;&gt;&lt;img") && !page.contains("<script"), "{page}");
    assert!(served.accounts.lock().unwrap().contains(&AccountsRequest::Counts));
}
