//! A proxy between kube-apiserver and etcd that can stall etcd's watch streams while every other
//! call (Range, Txn, Lease, …) goes through: the incident's failure, where the datastore kept
//! taking writes but the feed to the API server's watch cache broke.
//!
//! etcd's client speaks gRPC over cleartext HTTP/2 (`http://` endpoints, prior knowledge), one
//! connection multiplexing every call. The proxy forwards frames unchanged in both directions and
//! decodes (HPACK, never rewriting) the client's request headers to learn which streams are
//! `/etcdserverpb.Watch/Watch`. While stalled it drops the server's DATA frames on those streams —
//! the events and progress notifications the watch cache lives on — and gives etcd back their
//! flow-control credit (WINDOW_UPDATE for the stream and the connection), so nothing else on the
//! connection slows down. Un-stalled, later events flow again; the ones dropped are lost, as a
//! broken feed loses them. [`WatchStall::hold`] instead keeps those frames back and delivers them,
//! in order, on [`WatchStall::release`]: a watch cache that lags rather than freezes.
//!
//! Route only some resources through it with kube-apiserver's
//! `--etcd-servers-overrides=/configmaps#http://127.0.0.1:PORT` (each override gets its own etcd
//! client, so its own connection): the stall then reaches exactly those resources' watch cache.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
const WATCH_PATH: &[u8] = b"/etcdserverpb.Watch/Watch";

/// The proxy; it runs for the rest of the test process (its threads end with their connections).
pub struct WatchStall {
    addr: SocketAddr,
    stalled: Arc<AtomicBool>,
    held: Arc<Held>,
    dropped: Arc<AtomicU64>,
    watches: Arc<AtomicU64>,
}

impl WatchStall {
    /// Listen on a free loopback port; each connection goes to the etcd URL found in the file
    /// `upstream_file` at that moment (`tests/control-plane/up` writes `DIR/etcd-url` before it
    /// starts the API server, which is when the first connection comes).
    pub fn start(upstream_file: PathBuf) -> WatchStall {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind the watch-stall proxy");
        let addr = l.local_addr().unwrap();
        let stalled = Arc::new(AtomicBool::new(false));
        let held: Arc<Held> = Arc::default();
        let h = held.clone();
        let dropped = Arc::new(AtomicU64::new(0));
        let watches = Arc::new(AtomicU64::new(0));
        let (s, d, w) = (stalled.clone(), dropped.clone(), watches.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(client) = conn else { continue };
                let url = std::fs::read_to_string(&upstream_file).unwrap_or_default();
                let hostport = url.trim().trim_start_matches("http://").to_string();
                let Ok(server) = TcpStream::connect(&hostport) else {
                    continue; // the client sees the connection close, and retries
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (s, d, w, h) = (s.clone(), d.clone(), w.clone(), h.clone());
                std::thread::spawn(move || serve(client, server, s, d, w, h));
            }
        });
        WatchStall {
            addr,
            stalled,
            held,
            dropped,
            watches,
        }
    }

    /// The URL to give kube-apiserver for the resources that go through the proxy.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop (true) or resume (false) delivering watch events.
    pub fn stall(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
    }

    /// Keep watch events back (true) until [`release`](Self::release).
    pub fn hold(&self, on: bool) {
        self.held.on.store(on, Ordering::SeqCst);
    }

    /// Deliver the watch events held back, in order, and stop holding.
    pub fn release(&self) {
        let conns = self.held.conns.lock().unwrap();
        self.held.on.store(false, Ordering::SeqCst);
        for c in conns.iter() {
            let mut q = c.queue.lock().unwrap();
            let _ = c.to_client.lock().unwrap().write_all(&q);
            q.clear();
        }
    }

    /// Bytes of watch frames held back now.
    pub fn held(&self) -> usize {
        let conns = self.held.conns.lock().unwrap();
        conns.iter().map(|c| c.queue.lock().unwrap().len()).sum()
    }

    /// Whether the watch frames held back now carry `needle` (e.g. an object's etcd key,
    /// `/registry/configmaps/NS/NAME`: its event is among them; etcd's events are uncompressed).
    pub fn held_contains(&self, needle: &[u8]) -> bool {
        let conns = self.held.conns.lock().unwrap();
        conns.iter().any(|c| {
            c.queue
                .lock()
                .unwrap()
                .windows(needle.len().max(1))
                .any(|w| w == needle)
        })
    }

    /// Watch-stream DATA frames dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Watch streams seen so far (the API server's cacher opens one per resource it caches).
    pub fn watches(&self) -> u64 {
        self.watches.load(Ordering::SeqCst)
    }
}

/// Watch frames held back, per connection.
#[derive(Default)]
struct Held {
    on: AtomicBool,
    conns: Mutex<Vec<Arc<HeldConn>>>,
}

struct HeldConn {
    /// Lock order: `queue`, then `to_client`.
    queue: Mutex<Vec<u8>>,
    to_client: Mutex<TcpStream>,
}

fn read_frame(r: &mut impl Read) -> Option<([u8; 9], Vec<u8>)> {
    let mut h = [0u8; 9];
    r.read_exact(&mut h).ok()?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
    let mut p = vec![0u8; len];
    r.read_exact(&mut p).ok()?;
    Some((h, p))
}

fn stream_id(h: &[u8; 9]) -> u32 {
    u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff
}

fn window_update(stream: u32, n: u32) -> [u8; 13] {
    let mut f = [0u8; 13];
    f[2] = 4;
    f[3] = WINDOW_UPDATE;
    f[5..9].copy_from_slice(&stream.to_be_bytes());
    f[9..13].copy_from_slice(&n.to_be_bytes());
    f
}

fn serve(
    mut client: TcpStream,
    server: TcpStream,
    stalled: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    watches: Arc<AtomicU64>,
    held: Arc<Held>,
) {
    let watch_streams: Arc<Mutex<HashSet<u32>>> = Arc::default();
    // Both directions write to etcd (client frames, our WINDOW_UPDATEs): whole frames under a lock.
    let to_server = Arc::new(Mutex::new(server.try_clone().unwrap()));
    let mut from_server = server;
    let conn = Arc::new(HeldConn {
        queue: Mutex::new(Vec::new()),
        to_client: Mutex::new(client.try_clone().unwrap()),
    });
    held.conns.lock().unwrap().push(conn.clone());
    {
        let to_server = to_server.clone();
        let streams = watch_streams.clone();
        std::thread::spawn(move || {
            // Client → etcd: the preface, then frames; decode request headers to find watches.
            let mut preface = [0u8; 24];
            if client.read_exact(&mut preface).is_err() || preface != PREFACE {
                return;
            }
            if to_server.lock().unwrap().write_all(&preface).is_err() {
                return;
            }
            let mut decoder = hpack::Decoder::new();
            let mut block: Vec<u8> = Vec::new();
            let mut block_stream = 0;
            while let Some((h, p)) = read_frame(&mut client) {
                let (kind, flags) = (h[3], h[4]);
                let mut fragment: Option<&[u8]> = None;
                if kind == HEADERS {
                    let mut b = &p[..];
                    let mut pad = 0;
                    if flags & PADDED != 0 && !b.is_empty() {
                        pad = b[0] as usize;
                        b = &b[1..];
                    }
                    if flags & PRIORITY != 0 && b.len() >= 5 {
                        b = &b[5..];
                    }
                    fragment = Some(&b[..b.len().saturating_sub(pad)]);
                    block.clear();
                    block_stream = stream_id(&h);
                } else if kind == CONTINUATION {
                    fragment = Some(&p[..]);
                }
                if let Some(f) = fragment {
                    block.extend_from_slice(f);
                    if flags & END_HEADERS != 0 {
                        // Every block is decoded, in order, to keep the HPACK table in step.
                        if let Ok(headers) = decoder.decode(&block) {
                            if headers
                                .iter()
                                .any(|(k, v)| k == b":path" && v == WATCH_PATH)
                            {
                                streams.lock().unwrap().insert(block_stream);
                                watches.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                }
                let mut w = to_server.lock().unwrap();
                if w.write_all(&h).and_then(|_| w.write_all(&p)).is_err() {
                    break;
                }
            }
            let _ = to_server
                .lock()
                .unwrap()
                .shutdown(std::net::Shutdown::Write);
        });
    }
    // etcd → client: drop watch DATA while stalled, crediting etcd's flow-control windows.
    while let Some((h, p)) = read_frame(&mut from_server) {
        let (kind, flags, id) = (h[3], h[4], stream_id(&h));
        if kind == DATA
            && flags & END_STREAM == 0
            && stalled.load(Ordering::SeqCst)
            && watch_streams.lock().unwrap().contains(&id)
        {
            dropped.fetch_add(1, Ordering::SeqCst);
            if !p.is_empty() {
                let n = p.len() as u32;
                let mut w = to_server.lock().unwrap();
                let mut credit = window_update(0, n).to_vec();
                credit.extend_from_slice(&window_update(id, n));
                if w.write_all(&credit).is_err() {
                    break;
                }
            }
            continue;
        }
        let mut q = conn.queue.lock().unwrap();
        if kind == DATA
            && held.on.load(Ordering::SeqCst)
            && watch_streams.lock().unwrap().contains(&id)
        {
            q.extend_from_slice(&h);
            q.extend_from_slice(&p);
            continue;
        }
        // Frames held back on other streams go first when holding has ended.
        let mut w = conn.to_client.lock().unwrap();
        if !q.is_empty() && !held.on.load(Ordering::SeqCst) {
            if w.write_all(&q).is_err() {
                break;
            }
            q.clear();
        }
        if w.write_all(&h).and_then(|_| w.write_all(&p)).is_err() {
            break;
        }
    }
    let _ = conn
        .to_client
        .lock()
        .unwrap()
        .shutdown(std::net::Shutdown::Both);
}
