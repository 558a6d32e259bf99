//! What loading the model costs: the time of `Encoder::load` and the peak
//! resident memory of the process after it (`VmHWM`, Linux only). Needs the
//! model (env `CODE_MODE_MODEL_DIR`, default
//! `/opt/code-mode/models/all-minilm-l6-v2`). Run with
//! `cargo run -p code-mode-encoder --example load_peak` (the encoder is
//! optimised in the debug profile too).

use std::time::Instant;

use code_mode_encoder::Encoder;

/// A line of `/proc/self/status` (`VmHWM`, `VmRSS`), or `?` where there is none.
fn status(key: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).map(|l| l[key.len() + 1..].trim().to_string()))
        .unwrap_or_else(|| "?".into())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The tests' lookup: it says why when the model is not there.
    let Some(dir) = code_mode_core::testing::peers::search_model() else { return Ok(()) };
    println!("before load: VmHWM {}, VmRSS {}", status("VmHWM"), status("VmRSS"));
    let started = Instant::now();
    let encoder = Encoder::load(&dir)?;
    let took = started.elapsed();
    println!(
        "load {:.0} ms: VmHWM {}, VmRSS {} (fingerprint {})",
        took.as_secs_f64() * 1000.0,
        status("VmHWM"),
        status("VmRSS"),
        encoder.fingerprint()
    );
    Ok(())
}
