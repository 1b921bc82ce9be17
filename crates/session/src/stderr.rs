//! The session's stderr, held back while the dashboard has the terminal: a line written to it
//! then lands in the middle of the drawing and stays there (ratatui redraws only the cells that
//! change). CI once saw the journal's start-up line cut the dashboard's header. What is said
//! meanwhile (the journal's path or its failure, the agent's launch, the warm-up's verdict) is
//! kept, in order, and written once the dashboard has given the terminal back.

use std::io::Write as _;
use std::sync::Mutex;

/// `Some` while held: what was said meanwhile.
static HELD: Mutex<Option<String>> = Mutex::new(None);

/// Writes `text` to stderr, or keeps it while held. A closed stderr is not an error.
pub fn write(text: &str) {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    match held.as_mut() {
        Some(kept) => kept.push_str(text),
        None => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
}

/// Holds stderr while it lives ([`Held::hold`]) and writes what was kept when dropped, so
/// that a run that ends early on an error does not lose what it said.
#[derive(Default)]
pub struct Held(bool);

impl Held {
    /// From now on, what is said is kept, not written.
    pub fn hold(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        held.get_or_insert_with(String::new);
        self.0 = true;
    }

    /// Writes what was kept and lets what comes after through.
    pub fn release(&mut self) {
        if std::mem::take(&mut self.0) {
            let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(kept) = held.take() {
                let _ = std::io::stderr().write_all(kept.as_bytes());
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_said_while_held_is_kept_in_order_until_released() {
        let mut held = Held::default();
        held.hold();
        write("one\n");
        write("two\n");
        assert_eq!(HELD.lock().unwrap().as_deref(), Some("one\ntwo\n"));
        drop(held);
        assert_eq!(*HELD.lock().unwrap(), None);
        // Released: written at once, nothing kept.
        write("");
        assert_eq!(*HELD.lock().unwrap(), None);
    }
}
