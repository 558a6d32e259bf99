//! cargo-fuzz target `tool_schema`: the fuzzer's bytes go to `code_mode_bridge::fuzzing::tool_schema`, which
//! holds the input format and the properties checked (so the committed
//! seeds in `fuzz/seeds/tool_schema` replay as ordinary tests too).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| code_mode_bridge::fuzzing::tool_schema(data));
