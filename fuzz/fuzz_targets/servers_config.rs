//! cargo-fuzz target `servers_config`: the fuzzer's bytes go to `code_mode_bridge::fuzzing::servers_config`, which
//! holds the input format and the properties checked (so the committed
//! seeds in `fuzz/seeds/servers_config` replay as ordinary tests too).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| code_mode_bridge::fuzzing::servers_config(data));
