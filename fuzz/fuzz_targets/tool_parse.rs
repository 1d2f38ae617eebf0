//! A tool definition, as a tenant would upload it: parsing reports problems, never panics, and a
//! tool that compiles renders its function definitions.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_core::{Limits, Tool};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(tool) = Tool::parse_str(text, &Limits::default()) {
        let _ = tool.function_def(false);
        let _ = tool.function_def(true);
    }
});
