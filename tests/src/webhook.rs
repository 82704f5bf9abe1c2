//! An Alertmanager webhook receiver on loopback: records every notification's JSON body.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub struct Webhook {
    addr: SocketAddr,
    bodies: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Webhook {
    pub fn start() -> Webhook {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (bodies.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in l.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut len = 0usize;
                let mut line = String::new();
                // Request line and headers.
                loop {
                    line.clear();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let l = line.trim_end();
                    if l.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = l.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0u8; len.min(16 << 20)];
                if r.read_exact(&mut body).is_ok() {
                    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                        b.lock().unwrap().push(v);
                    }
                }
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Webhook {
            addr,
            bodies,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/alerts", self.addr)
    }

    /// Every alert of every notification received so far, in order, with the notification's
    /// status (`firing`/`resolved`) as the alert's own `status`.
    pub fn alerts(&self) -> Vec<Value> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|b| b["alerts"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
