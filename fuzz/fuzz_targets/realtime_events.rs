//! A Realtime server event as it arrives on the call's WebSocket: reading it gives an event or
//! an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The realtime crate's own source file, compiled here without the rest of that crate.
#[path = "../../crates/realtime/src/events.rs"]
#[allow(dead_code)]
mod events;

use events::ServerEvent;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ServerEvent::parse(text);
});
