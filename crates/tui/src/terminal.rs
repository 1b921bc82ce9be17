//! The terminal, borrowed for the dashboard and always given back: on Drop, from a panic
//! hook (a panic on any thread must not leave a raw, alternate-screen terminal behind), and
//! by a watcher process when tailscope is killed with SIGKILL and can do nothing itself.

use std::io::{self, BufRead, BufReader, Stdout, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, Once};

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// Puts the terminal back: main screen, cooked mode, cursor shown. Safe to call twice.
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
    Watcher::stand_down();
}

/// The watcher's script. It saves the terminal's settings before the dashboard changes
/// them, says `ready`, and waits on its stdin, a pipe only tailscope writes: `done` when
/// tailscope put the terminal back itself; end of file without it when tailscope died
/// (SIGKILL, an abort), and then it leaves the alternate screen, shows the cursor and
/// restores the saved settings. Leaving the screen comes first, with the shell's builtin
/// printf, because the shell that ran tailscope reaps it at the same moment and prints its
/// `Killed` line and prompt: printed while the alternate screen is still up, they vanish
/// with it (stty first, an exec, lost the race 9 times in 15 kills; printf first, once).
/// It ignores the signals a terminal or a process group gets,
/// so that it outlives tailscope (SIGTTOU ignored also lets a background process set the
/// terminal). A shell and stty rather than a fork: no unsafe, and stty knows termios.
const WATCHER: &str = r#"trap '' INT TERM HUP QUIT TSTP TTIN TTOU PIPE
saved=$(stty -g </dev/tty) || exit 0
echo ready
read -r word
[ "$word" = done ] && exit 0
printf '\033[?1049l\033[?25h\033[0m\n' >/dev/tty
stty "$saved" </dev/tty
"#;

/// The watcher process, while the dashboard holds the terminal.
struct Watcher {
    child: Child,
    stdin: ChildStdin,
}

static WATCHER_NOW: Mutex<Option<Watcher>> = Mutex::new(None);

impl Watcher {
    /// Starts the watcher and waits until it has saved the terminal's settings; without a
    /// shell or a terminal there is none (the dashboard still runs; only SIGKILL's cleanup
    /// is lost).
    fn start() {
        let Ok(mut child) = Command::new("sh")
            .args(["-c", WATCHER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        else {
            return;
        };
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return;
        };
        let mut line = String::new();
        if BufReader::new(stdout).read_line(&mut line).is_ok() && line.trim() == "ready" {
            if let Ok(mut now) = WATCHER_NOW.lock() {
                *now = Some(Watcher { child, stdin });
                return;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Tells the watcher that the terminal is back, and reaps it.
    fn stand_down() {
        let watcher = WATCHER_NOW.lock().ok().and_then(|mut w| w.take());
        if let Some(Watcher {
            mut child,
            mut stdin,
        }) = watcher
        {
            let _ = stdin.write_all(b"done\n");
            drop(stdin);
            let _ = child.wait();
        }
    }
}

fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Owns the terminal while the dashboard runs.
pub struct TerminalGuard {
    /// The ratatui terminal.
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalGuard {
    /// Raw mode, alternate screen, hidden cursor.
    pub fn enter() -> io::Result<TerminalGuard> {
        install_panic_hook();
        Watcher::start();
        if let Err(e) = enable_raw_mode() {
            Watcher::stand_down();
            return Err(e);
        }
        let mut stdout = io::stdout();
        if let Err(e) = execute!(stdout, EnterAlternateScreen, Hide) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(stdout)) {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}
