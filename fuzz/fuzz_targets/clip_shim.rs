#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| inca_fuzz::run("clip_shim", data));
