//! cargo-fuzz target `line_protocol`: the fuzzer's bytes go to `code_mode_sandbox_runner::fuzzing::line_protocol`, which
//! holds the input format and the properties checked (so the committed
//! seeds in `fuzz/seeds/line_protocol` replay as ordinary tests too).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| code_mode_sandbox_runner::fuzzing::line_protocol(data));
