//! iSCSI sysfs trees with the kernel's real layout, for hosts this kernel cannot be (it has no
//! iSCSI transport). Modelled on open-iscsi's software initiator (iscsi_tcp) on a real node:
//!
//! ```text
//! sys/devices/platform/host2/                                   the SCSI host of one session
//!   scsi_host/host2/, iscsi_host/host2/                         (class devices of the host)
//!   session1/                                                   the session device
//!     iscsi_session/session1/{state,recovery_tmo,targetname,…}  transport-class attributes
//!       device -> ../../../session1
//!     connection1:0/iscsi_connection/connection1:0/{state,persistent_address,…}
//!       device -> ../../../connection1:0
//!     target2:0:0/2:0:0:0/{state,vendor,model,type,…}           the LUN
//!       block/sdb/{dev,size,ro,removable}                       its disk; device -> ../../../2:0:0:0
//! sys/class/iscsi_session/session1 -> ../../devices/platform/host2/session1/iscsi_session/session1
//! sys/class/iscsi_connection/connection1:0 -> ../../devices/platform/host2/session1/connection1:0/iscsi_connection/connection1:0
//! sys/class/iscsi_host/host2, sys/class/scsi_host/host2 -> ../../devices/platform/host2/…/host2
//! sys/block/sdb, sys/class/block/sdb -> ../devices/platform/host2/session1/target2:0:0/2:0:0:0/block/sdb
//! ```
//!
//! Credentials (`username`, `password`, …) are created mode 000: the kernel answers EACCES to
//! anyone without CAP_SYS_ADMIN, and a check must never need them.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

/// A disk (LUN) of a session.
#[derive(Debug, Clone)]
pub struct Lun {
    pub lun: u32,
    /// SCSI device state: running, blocked, transport-offline, offline, …
    pub state: String,
    /// Block device name and `maj:min`; `None` for a LUN without a disk.
    pub disk: Option<(String, String)>,
}

/// One session as the kernel shows it. `host` defaults to `sid + 1` (each iscsi_tcp session
/// gets its own SCSI host).
#[derive(Debug, Clone)]
pub struct Session {
    pub sid: u32,
    pub host: u32,
    pub target: String,
    pub state: String,
    pub recovery_tmo: String,
    pub tpgt: String,
    pub iface: String,
    pub portal: (String, u16),
    /// `None`: a kernel before 5.7, no connection `state` attribute.
    pub conn_state: Option<String>,
    pub luns: Vec<Lun>,
}

impl Session {
    /// A healthy logged-in session with no LUN yet.
    pub fn new(sid: u32, target: &str) -> Session {
        Session {
            sid,
            host: sid + 1,
            target: target.into(),
            state: "LOGGED_IN".into(),
            recovery_tmo: "120".into(),
            tpgt: "1".into(),
            iface: "default".into(),
            portal: ("10.152.183.10".into(), 3260),
            conn_state: Some("up".into()),
            luns: Vec::new(),
        }
    }
    pub fn host(mut self, h: u32) -> Self {
        self.host = h;
        self
    }
    pub fn state(mut self, s: &str) -> Self {
        self.state = s.into();
        self
    }
    pub fn recovery_tmo(mut self, s: &str) -> Self {
        self.recovery_tmo = s.into();
        self
    }
    pub fn iface(mut self, s: &str) -> Self {
        self.iface = s.into();
        self
    }
    pub fn portal(mut self, addr: &str, port: u16) -> Self {
        self.portal = (addr.into(), port);
        self
    }
    pub fn conn_state(mut self, s: Option<&str>) -> Self {
        self.conn_state = s.map(str::to_string);
        self
    }
    /// LUN `lun` with disk `sd` (`maj:min` `dev`) in SCSI state `state`.
    pub fn disk(mut self, lun: u32, sd: &str, dev: &str, state: &str) -> Self {
        self.luns.push(Lun {
            lun,
            state: state.into(),
            disk: Some((sd.into(), dev.into())),
        });
        self
    }
    /// Set the state of every LUN (e.g. `blocked` while FAILED, `transport-offline` once FREE).
    pub fn luns_state(mut self, s: &str) -> Self {
        for l in &mut self.luns {
            l.state = s.into();
        }
        self
    }
}

/// A fake `/sys` in a directory.
pub struct Sysfs {
    pub root: PathBuf,
}

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

fn link(target: &str, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    symlink(target, at).unwrap();
}

impl Sysfs {
    /// `<base>/sys` with the class and block directories every kernel has, but no iSCSI class
    /// (the transport module not loaded) until a session is added.
    pub fn new(base: &Path) -> Sysfs {
        let root = base.join("sys");
        for d in [
            "class/block",
            "class/scsi_host",
            "block",
            "devices/platform",
            "devices/virtual/block",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        Sysfs { root }
    }

    /// The session device directory `devices/platform/hostH/sessionN`.
    pub fn session_dir(&self, s: &Session) -> PathBuf {
        self.root
            .join(format!("devices/platform/host{}/session{}", s.host, s.sid))
    }

    /// The transport-class attribute directory `…/sessionN/iscsi_session/sessionN`.
    pub fn session_attrs(&self, s: &Session) -> PathBuf {
        self.session_dir(s)
            .join(format!("iscsi_session/session{}", s.sid))
    }

    /// The connection attribute directory `…/connectionN:0/iscsi_connection/connectionN:0`.
    pub fn conn_attrs(&self, s: &Session) -> PathBuf {
        let c = format!("connection{}:0", s.sid);
        self.session_dir(s)
            .join(&c)
            .join("iscsi_connection")
            .join(&c)
    }

    /// The SCSI device directory of a LUN: `…/targetH:0:0/H:0:0:L`.
    pub fn lun_dir(&self, s: &Session, lun: u32) -> PathBuf {
        self.session_dir(s)
            .join(format!("target{h}:0:0/{h}:0:0:{lun}", h = s.host))
    }

    /// Create the whole session: host, session, connection, LUNs, disks, and every class and
    /// block symlink. Returns the session device directory.
    pub fn add(&self, s: &Session) -> PathBuf {
        let h = s.host;
        let sid = s.sid;
        let host_dir = self.root.join(format!("devices/platform/host{h}"));
        write(&host_dir.join("uevent"), "DEVTYPE=scsi_host\n");
        write(
            &host_dir.join(format!("scsi_host/host{h}/proc_name")),
            "iscsi_tcp\n",
        );
        write(
            &host_dir.join(format!("scsi_host/host{h}/state")),
            "running\n",
        );
        write(
            &host_dir.join(format!("iscsi_host/host{h}/initiatorname")),
            "iqn.1993-08.org.debian:01:5e8f2a9c7d1\n",
        );
        link(
            &format!("../../devices/platform/host{h}/scsi_host/host{h}"),
            &self.root.join(format!("class/scsi_host/host{h}")),
        );
        link(
            &format!("../../devices/platform/host{h}/iscsi_host/host{h}"),
            &self.root.join(format!("class/iscsi_host/host{h}")),
        );

        let sdir = self.session_dir(s);
        write(&sdir.join("uevent"), "DEVTYPE=iscsi_session\n");
        let a = self.session_attrs(s);
        for (f, v) in [
            ("state", s.state.as_str()),
            ("recovery_tmo", s.recovery_tmo.as_str()),
            ("targetname", s.target.as_str()),
            ("tpgt", s.tpgt.as_str()),
            ("ifacename", s.iface.as_str()),
            ("initiatorname", "iqn.1993-08.org.debian:01:5e8f2a9c7d1"),
            ("abort_tmo", "15"),
            ("lu_reset_tmo", "30"),
            ("tgt_reset_tmo", "30"),
            ("fast_abort", "1"),
            ("creator", "2138"),
            ("target_id", "0"),
            ("erl", "0"),
            ("initial_r2t", "1"),
            ("immediate_data", "1"),
            ("first_burst_len", "262144"),
            ("max_burst_len", "16776192"),
        ] {
            write(&a.join(f), &format!("{v}\n"));
        }
        for f in ["username", "password", "username_in", "password_in"] {
            let p = a.join(f);
            write(&p, "");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        link(&format!("../../../session{sid}"), &a.join("device"));
        link(
            &format!("../../devices/platform/host{h}/session{sid}/iscsi_session/session{sid}"),
            &self.root.join(format!("class/iscsi_session/session{sid}")),
        );

        let c = format!("connection{sid}:0");
        let ca = self.conn_attrs(s);
        let port = s.portal.1.to_string();
        let mut conn_attrs = vec![
            ("persistent_address", s.portal.0.as_str()),
            ("persistent_port", port.as_str()),
            ("address", s.portal.0.as_str()),
            ("port", port.as_str()),
            ("ping_tmo", "5"),
            ("recv_tmo", "5"),
            ("header_digest", "None"),
            ("data_digest", "None"),
            ("max_recv_dlength", "262144"),
            ("max_xmit_dlength", "65536"),
        ];
        if let Some(st) = &s.conn_state {
            conn_attrs.push(("state", st.as_str()));
        }
        for (f, v) in conn_attrs {
            write(&ca.join(f), &format!("{v}\n"));
        }
        link(&format!("../../../{c}"), &ca.join("device"));
        link(
            &format!("../../devices/platform/host{h}/session{sid}/{c}/iscsi_connection/{c}"),
            &self.root.join(format!("class/iscsi_connection/{c}")),
        );

        for l in &s.luns {
            let ldir = self.lun_dir(s, l.lun);
            for (f, v) in [
                ("state", l.state.as_str()),
                ("vendor", "OPENEBS "),
                ("model", "iscsi-vol       "),
                ("type", "0"),
                ("device_blocked", "0"),
                ("queue_depth", "32"),
            ] {
                write(&ldir.join(f), &format!("{v}\n"));
            }
            write(
                &self.session_dir(s).join(format!("target{h}:0:0/uevent")),
                "DEVTYPE=scsi_target\n",
            );
            if let Some((sd, dev)) = &l.disk {
                let b = ldir.join("block").join(sd);
                write(&b.join("dev"), &format!("{dev}\n"));
                write(&b.join("size"), "20971520\n");
                write(&b.join("ro"), "0\n");
                write(&b.join("removable"), "0\n");
                std::fs::create_dir_all(b.join("holders")).unwrap();
                link(&format!("../../../{h}:0:0:{}", l.lun), &b.join("device"));
                let rel = format!(
                    "devices/platform/host{h}/session{sid}/target{h}:0:0/{h}:0:0:{}/block/{sd}",
                    l.lun
                );
                link(&format!("../{rel}"), &self.root.join("block").join(sd));
                link(
                    &format!("../../{rel}"),
                    &self.root.join("class/block").join(sd),
                );
            }
        }
        sdir
    }
}

/// A mountinfo line for a filesystem on `maj:min` mounted at `mount_point` (ext4, `rw` unless
/// `super_opts` says otherwise).
pub fn mountinfo_line(
    id: u32,
    majmin: &str,
    mount_point: &Path,
    dev: &str,
    super_opts: &str,
) -> String {
    format!(
        "{id} 29 {majmin} / {} rw,relatime shared:{id} - ext4 /dev/{dev} {super_opts}\n",
        mount_point.display().to_string().replace(' ', "\\040")
    )
}
