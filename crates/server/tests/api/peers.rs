//! Real third-party peers for the toolkit tests, run on loopback from a Python environment
//! made by `scripts/py-toolkit-peers.sh` (once per test process): Radicale, a CalDAV server,
//! and aiosmtpd, an SMTP server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The interpreter of `target/py-toolkits` (made on first use).
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = Command::new("bash")
                .arg(root.join("scripts/py-toolkit-peers.sh"))
                .stderr(Stdio::inherit())
                .output()
                .expect("run scripts/py-toolkit-peers.sh");
            assert!(
                out.status.success(),
                "scripts/py-toolkit-peers.sh failed: the toolkit tests need Radicale from PyPI"
            );
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            let path = PathBuf::from(path);
            if path.is_absolute() {
                path
            } else {
                root.join(path)
            }
        })
        .clone()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A Radicale server on 127.0.0.1 with one user (`alice`, plain htpasswd); killed on drop.
pub struct Radicale {
    pub base: String,
    pub user: &'static str,
    pub password: &'static str,
    child: Child,
    _dir: TempDir,
}

impl Radicale {
    pub async fn start() -> Radicale {
        let python = python();
        let dir = TempDir::new("radicale");
        let users = dir.0.join("users");
        std::fs::write(&users, "alice:wonderland-pass-41\n").expect("htpasswd");
        let port = free_port();
        let child = Command::new(python)
            .args(["-m", "radicale", "--server-hosts"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--storage-filesystem-folder")
            .arg(dir.0.join("collections"))
            .args(["--auth-type", "htpasswd", "--auth-htpasswd-filename"])
            .arg(&users)
            .args(["--auth-htpasswd-encryption", "plain", "--auth-delay", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start radicale");
        let r = Radicale {
            base: format!("http://127.0.0.1:{port}"),
            user: "alice",
            password: "wonderland-pass-41",
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "radicale did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        r
    }

    /// Makes the calendar collection `/alice/<name>/` and returns its URL.
    pub async fn calendar(&self, name: &str) -> String {
        let client = reqwest::Client::new();
        let home = format!("{}/{}/", self.base, self.user);
        // The user's principal collection is made on first access.
        let _ = client
            .request(reqwest::Method::from_bytes(b"PROPFIND").unwrap(), &home)
            .basic_auth(self.user, Some(self.password))
            .header("Depth", "0")
            .send()
            .await
            .expect("propfind");
        let url = format!("{home}{name}/");
        let resp = client
            .request(reqwest::Method::from_bytes(b"MKCALENDAR").unwrap(), &url)
            .basic_auth(self.user, Some(self.password))
            .send()
            .await
            .expect("mkcalendar");
        assert!(resp.status().is_success(), "MKCALENDAR: {}", resp.status());
        url
    }

    /// Stores an event made by another client.
    pub async fn put_event(&self, calendar: &str, uid: &str, title: &str, start: &str, end: &str) {
        let ics = format!(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20300101T000000Z\r\nDTSTART:{start}\r\nDTEND:{end}\r\nSUMMARY:{title}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        );
        self.put_ics(calendar, uid, &ics).await;
    }

    /// Stores an iCalendar object as another client wrote it (e.g. with `TZID=` times).
    pub async fn put_ics(&self, calendar: &str, uid: &str, ics: &str) {
        let ics = ics.to_owned();
        let resp = reqwest::Client::new()
            .put(format!("{calendar}{uid}.ics"))
            .basic_auth(self.user, Some(self.password))
            .header("Content-Type", "text/calendar")
            .body(ics)
            .send()
            .await
            .expect("put event");
        assert!(resp.status().is_success(), "PUT: {}", resp.status());
    }
}

impl Drop for Radicale {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the SMTP peer does: takes mail for anyone but `nobody@…` (550), appending each message
/// to the file named by `SB_SMTP_OUT`.
const SMTP_HANDLER: &str = r#"
import os

class Handler:
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("nobody@"):
            return "550 5.1.1 <%s>: Recipient address rejected: User unknown" % address
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with open(os.environ["SB_SMTP_OUT"], "ab") as f:
            f.write(envelope.content + b"\r\n.\r\n")
        return "250 Message accepted for delivery"
"#;

/// An aiosmtpd server on 127.0.0.1 (no TLS, no auth); killed on drop.
pub struct SmtpPeer {
    pub port: u16,
    out: PathBuf,
    child: Child,
    _dir: TempDir,
}

impl SmtpPeer {
    pub async fn start() -> SmtpPeer {
        let python = python();
        let dir = TempDir::new("smtp");
        std::fs::write(dir.0.join("sbhandler.py"), SMTP_HANDLER).expect("handler");
        let out = dir.0.join("mail.txt");
        let port = free_port();
        let child = Command::new(python)
            .args(["-m", "aiosmtpd", "-n", "-l"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["-c", "sbhandler.Handler"])
            .env("PYTHONPATH", &dir.0)
            .env("SB_SMTP_OUT", &out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start aiosmtpd");
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "aiosmtpd did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        SmtpPeer {
            port,
            out,
            child,
            _dir: dir,
        }
    }

    /// Every message received so far, as text.
    pub fn received(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for SmtpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "sb-{what}-{}",
            std::iter::repeat_with(fastrand::lowercase)
                .take(12)
                .collect::<String>()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
