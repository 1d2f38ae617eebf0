//! A TCP proxy the process tests put between two processes (a node and PostgreSQL, a node and
//! another node) to break the network between them the ways networks break: refusing
//! (open connections and new ones closed at once, as during a database failover), blackholed
//! (nothing gets through either way, and nothing is refused; what was sent is held and
//! delivered when the network heals, as TCP would after a partition), or slow (every chunk
//! delayed, both ways).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does to traffic now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// Everything passes.
    Up,
    /// Open connections are closed, and new ones as soon as they are accepted.
    Refusing,
    /// Nothing passes and nothing is refused: bytes wait until the network heals.
    Blackholed,
    /// Every chunk waits this long before it goes on, in each direction.
    Slow(Duration),
}

impl Net {
    fn encode(self) -> u64 {
        match self {
            Net::Up => 0,
            Net::Refusing => 1,
            Net::Blackholed => 2,
            Net::Slow(d) => 3 + u64::try_from(d.as_millis()).unwrap(),
        }
    }

    fn decode(v: u64) -> Net {
        match v {
            0 => Net::Up,
            1 => Net::Refusing,
            2 => Net::Blackholed,
            ms => Net::Slow(Duration::from_millis(ms - 3)),
        }
    }
}

/// A running proxy to `target`; stops (and drops every connection) when dropped.
pub struct Proxy {
    /// Where to connect instead of the target.
    pub addr: SocketAddr,
    net: Arc<AtomicU64>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let net = Arc::new(AtomicU64::new(Net::Up.encode()));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let task = tokio::spawn({
            let (net, connections) = (Arc::clone(&net), Arc::clone(&connections));
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    if Net::decode(net.load(Ordering::SeqCst)) == Net::Refusing {
                        drop(client);
                        continue;
                    }
                    let net = Arc::clone(&net);
                    let c = tokio::spawn(relay(client, target, net));
                    let mut held = connections.lock().unwrap();
                    held.retain(|c| !c.is_finished());
                    held.push(c);
                }
            }
        });
        Proxy {
            addr,
            net,
            connections,
            task,
        }
    }

    /// `host:port` of the proxy, for a URL.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// Changes what the proxy does; `Refusing` also closes every open connection.
    pub fn set(&self, net: Net) {
        self.net.store(net.encode(), Ordering::SeqCst);
        if net == Net::Refusing {
            for c in self.connections.lock().unwrap().drain(..) {
                c.abort();
            }
        }
    }
}

/// One connection, both ways, until either side closes or the proxy refuses.
async fn relay(client: TcpStream, target: SocketAddr, net: Arc<AtomicU64>) {
    // A blackholed network connects nowhere: the client's connection waits, accepted.
    wait_while_blackholed(&net).await;
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, Arc::clone(&net));
    let down = pump(server_read, client_write, net);
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    net: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        wait_while_blackholed(&net).await;
        if let Net::Slow(d) = Net::decode(net.load(Ordering::SeqCst)) {
            tokio::time::sleep(d).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

async fn wait_while_blackholed(net: &AtomicU64) {
    while Net::decode(net.load(Ordering::SeqCst)) == Net::Blackholed {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
