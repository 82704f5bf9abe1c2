//! `--web.config.file`: TLS and basic auth for `serve`, in the file format of the Prometheus
//! exporter-toolkit (what node_exporter and Prometheus itself read), the subset that applies:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: /etc/k8s-storage-checks/tls.crt   # PEM, the chain
//!   key_file: /etc/k8s-storage-checks/tls.key    # PEM, PKCS#8, PKCS#1 or SEC1
//!   client_ca_file: /etc/.../ca.crt             # optional: with client_auth_type below
//!   client_auth_type: RequireAndVerifyClientCert # or NoClientCert (default)
//!   min_version: TLS12                           # or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...                       # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':')
//! ```
//!
//! A key it does not know is an error naming it (never a setting silently ignored).

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    #[serde(default)]
    pub tls_server_config: Option<TlsServerConfig>,
    #[serde(default)]
    pub basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    #[serde(default)]
    pub client_auth_type: Option<String>,
    #[serde(default)]
    pub min_version: Option<String>,
}

/// The most a config, certificate or key file may take.
const FILE_MAX: u64 = 1 << 20;

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    match plugin::capped::read_capped(f, FILE_MAX) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(format!(
            "{what} {}: more than {} KiB",
            path.display(),
            FILE_MAX >> 10
        )),
        Err(e) => Err(format!("{what} {}: {e}", path.display())),
    }
}

impl WebConfig {
    /// Read and check a web config file (bcrypt hashes are checked to be hashes; files named in
    /// it are read when the TLS settings are built).
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let text = read(path, "--web.config.file")?;
        let c: WebConfig = if text.iter().all(u8::is_ascii_whitespace) {
            WebConfig::default()
        } else {
            serde_yaml_ng::from_slice(&text)
                .map_err(|e| format!("--web.config.file {}: {e}", path.display()))?
        };
        for (user, hash) in &c.basic_auth_users {
            if user.contains(':') || user.is_empty() {
                return Err(format!("basic_auth_users: {user:?} is not a user name"));
            }
            if !(hash.starts_with("$2") && hash.parse::<bcrypt::HashParts>().is_ok()) {
                return Err(format!(
                    "basic_auth_users: the password of {user:?} is not a bcrypt hash \
                     (make one with: htpasswd -nBC 10 {user})"
                ));
            }
        }
        Ok(c)
    }

    /// The TLS server settings, when the file asks for TLS.
    pub fn tls(&self) -> Result<Option<Arc<rustls::ServerConfig>>, String> {
        let Some(t) = &self.tls_server_config else {
            return Ok(None);
        };
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&read(&t.cert_file, "cert_file")?)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("cert_file {}: {e}", t.cert_file.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "cert_file {}: no certificate in it",
                t.cert_file.display()
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(&read(&t.key_file, "key_file")?)
            .map_err(|e| format!("key_file {}: {e}", t.key_file.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] = match t.min_version.as_deref() {
            None | Some("TLS12") => &[&rustls::version::TLS13, &rustls::version::TLS12],
            Some("TLS13") => &[&rustls::version::TLS13],
            Some(v) => {
                return Err(format!(
                "tls_server_config.min_version {v:?}: TLS12 or TLS13 (older ones are not offered)"
            ))
            }
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match (t.client_auth_type.as_deref(), &t.client_ca_file) {
            (None | Some("NoClientCert"), None) => builder.with_no_client_auth(),
            (Some("RequireAndVerifyClientCert"), Some(ca)) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(&read(ca, "client_ca_file")?) {
                    let c = c.map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?;
                    roots
                        .add(c)
                        .map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?;
                }
                let v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(v)
            }
            (a, ca) => {
                return Err(format!(
                    "tls_server_config: client_auth_type {a:?} with client_ca_file {ca:?}: \
                     supported are NoClientCert (no client_ca_file) and \
                     RequireAndVerifyClientCert (with client_ca_file)"
                ))
            }
        };
        let cfg = builder
            .with_single_cert(certs, key)
            .map_err(|e| format!("cert_file/key_file: {e}"))?;
        Ok(Some(Arc::new(cfg)))
    }
}

/// Basic auth as configured: the users and their bcrypt hashes, and the credentials that
/// verified recently (bcrypt is slow on purpose: a scrape every few seconds should not pay it
/// each time). The cache keeps a SHA-256 of user and password, never the password.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    good: Mutex<Vec<[u8; 32]>>,
}

impl BasicAuth {
    pub fn new(users: BTreeMap<String, String>) -> Option<BasicAuth> {
        (!users.is_empty()).then(|| BasicAuth {
            users,
            good: Mutex::new(Vec::new()),
        })
    }

    /// Whether an `Authorization` header value lets the request in.
    pub fn allows(&self, header: Option<&str>) -> bool {
        use sha2::Digest;
        let Some(h) = header else { return false };
        let Some(b64) = h
            .strip_prefix("Basic ")
            .or_else(|| h.strip_prefix("basic "))
        else {
            return false;
        };
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else {
            return false;
        };
        let Ok(raw) = String::from_utf8(raw) else {
            return false;
        };
        let Some((user, pass)) = raw.split_once(':') else {
            return false;
        };
        let Some(hash) = self.users.get(user) else {
            return false;
        };
        let mut d = sha2::Sha256::new();
        d.update(hash.as_bytes());
        d.update([0]);
        d.update(raw.as_bytes());
        let key: [u8; 32] = d.finalize().into();
        if let Ok(g) = self.good.lock() {
            if g.contains(&key) {
                return true;
            }
        }
        let ok = bcrypt::verify(pass, hash).unwrap_or(false);
        if ok {
            if let Ok(mut g) = self.good.lock() {
                if g.len() >= 16 {
                    g.remove(0);
                }
                g.push(key);
            }
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration file in the temporary directory, removed when the test is done with it.
    fn write(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new()
            .prefix("ksc-webcfg-")
            .tempfile()
            .unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn unknown_keys_and_plain_passwords_are_refused() {
        let p = write("basic_auth_users:\n  u: secret\n");
        let e = WebConfig::load(p.path()).unwrap_err();
        assert!(
            e.contains("not a bcrypt hash") && e.contains("htpasswd"),
            "{e}"
        );
        let p = write("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher: x\n");
        let e = WebConfig::load(p.path()).unwrap_err();
        assert!(e.contains("cipher"), "{e}");
        let p = write("http_server_config:\n  http2: false\n");
        assert!(WebConfig::load(p.path())
            .unwrap_err()
            .contains("http_server_config"));
        let p = write("");
        assert!(WebConfig::load(p.path()).unwrap().tls().unwrap().is_none());
    }

    #[test]
    fn basic_auth_checks_the_bcrypt_hash() {
        let hash = bcrypt::hash_with_result("s3cret", 4)
            .unwrap()
            .format_for_version(bcrypt::Version::TwoY);
        let p = write(&format!("basic_auth_users:\n  prom: '{hash}'\n"));
        let c = WebConfig::load(p.path()).unwrap();
        let a = BasicAuth::new(c.basic_auth_users).unwrap();
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert!(a.allows(Some(&format!("Basic {}", b64("prom:s3cret")))));
        // Cached, and still exact.
        assert!(a.allows(Some(&format!("Basic {}", b64("prom:s3cret")))));
        assert!(!a.allows(Some(&format!("Basic {}", b64("prom:s3cret2")))));
        assert!(!a.allows(Some(&format!("Basic {}", b64("other:s3cret")))));
        assert!(!a.allows(Some("Basic %%%")));
        assert!(!a.allows(None));
    }
}
