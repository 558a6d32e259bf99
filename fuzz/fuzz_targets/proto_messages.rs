//! cargo-fuzz target `proto_messages`: the fuzzer's bytes go to `code_mode_proto::fuzzing::messages`, which
//! holds the input format and the properties checked (so the committed
//! seeds in `fuzz/seeds/proto_messages` replay as ordinary tests too).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| code_mode_proto::fuzzing::messages(data));
