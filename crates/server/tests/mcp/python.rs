//! The official MCP Python SDK as the real peer: its interpreter (set up once), its server run
//! as a child process that dies with the test, and its client run as a one-shot script.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The pin of the SDK; `scripts/py-mcp-venv.sh` installs the same.
const MCP_PIN: &str = "mcp==2.3.*";
const MARKER: &str = ".installed-mcp-2.3";

pub fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    }
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `$SWITCHBOARD_PYTHON` when set; otherwise `target/py-mcp/bin/python`, a venv with the MCP SDK
/// made on first use (under a file lock, so parallel test binaries make it once).
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("SWITCHBOARD_PYTHON") {
                return PathBuf::from(p);
            }
            let target = target_dir();
            std::fs::create_dir_all(&target).expect("target dir");
            let venv = target.join("py-mcp");
            let lock = std::fs::File::create(target.join("py-mcp.lock")).expect("lock file");
            lock.lock().expect("lock the venv");
            if !venv.join(MARKER).exists() {
                run(
                    Command::new("python3").args(["-m", "venv"]).arg(&venv),
                    "python3 -m venv target/py-mcp",
                );
                run(
                    Command::new(venv.join("bin/python")).args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                        MCP_PIN,
                    ]),
                    "pip install mcp (PyPI must be reachable, or set SWITCHBOARD_PYTHON)",
                );
                std::fs::write(venv.join(MARKER), MCP_PIN).expect("marker");
            }
            venv.join("bin/python")
        })
        .clone()
}

/// A free port on 127.0.0.1 (bound, then released for the child to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The SDK's MCPServer (`calc_server.py`) on a port: killed when dropped.
pub struct CalcServer {
    pub port: u16,
    child: Child,
}

impl CalcServer {
    /// Starts it and waits until it accepts connections.
    pub async fn start(port: u16) -> CalcServer {
        Self::start_with(port, &[]).await
    }

    /// Starts it as a server of the 2025-11-25 revision only (sessions, no `server/discover`).
    pub async fn start_legacy(port: u16) -> CalcServer {
        Self::start_with(port, &["legacy"]).await
    }

    async fn start_with(port: u16, extra: &[&str]) -> CalcServer {
        let child = Command::new(python())
            .arg(scripts().join("calc_server.py"))
            .arg(port.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start calc_server.py");
        let server = CalcServer { port, child };
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "calc_server.py did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Kills it at once (SIGKILL), as a crash would.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for CalcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `agent_client.py` with a plan (`url`, `headers`, `calls`) and returns what it printed.
pub async fn client(plan: &Value) -> Value {
    let run = tokio::process::Command::new(python())
        .arg(scripts().join("agent_client.py"))
        .arg(plan.to_string())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("agent_client.py finished in time")
        .expect("run agent_client.py");
    assert!(
        out.status.success(),
        "agent_client.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "agent_client.py printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
