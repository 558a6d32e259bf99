//! cargo-fuzz target `settings_toml`: the fuzzer's bytes go to `code_mode::fuzzing::settings`, which
//! holds the input format and the properties checked (so the committed
//! seeds in `fuzz/seeds/settings_toml` replay as ordinary tests too).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| code_mode::fuzzing::settings(data));
