//! The few protobuf messages the check reads, decoded by hand (every request it sends is an
//! empty message, so nothing is encoded): the kubelet's `pluginregistration.PluginInfo`
//! (k8s.io/kubelet `pkg/apis/pluginregistration/v1/api.proto`) and CSI's
//! `csi.v1.GetPluginInfoResponse` and `csi.v1.ProbeResponse` (the CSI spec's `csi.proto`).
//! Unknown fields are skipped as the wire format says; a malformed message is an error, never a
//! panic; strings are kept to [`STRING_MAX`] bytes.

/// The longest string field kept (longer ones are cut at a character boundary).
pub const STRING_MAX: usize = 4096;

/// At most this many `supported_versions` are kept.
const VERSIONS_MAX: usize = 32;

/// `pluginregistration.PluginInfo`: what a registration socket answers to `GetInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginInfo {
    /// 1: `CSIPlugin`, `DevicePlugin`, `DRAPlugin`.
    pub type_: String,
    /// 2: the driver name.
    pub name: String,
    /// 3: the driver's own socket (empty: the registration socket itself).
    pub endpoint: String,
    /// 4.
    pub supported_versions: Vec<String>,
}

/// `csi.v1.GetPluginInfoResponse`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetPluginInfo {
    /// 1.
    pub name: String,
    /// 2.
    pub vendor_version: String,
}

/// `csi.v1.ProbeResponse`: field 1, `ready`, a `google.protobuf.BoolValue`. The spec: "If not
/// present, the CO MAY assume the plugin is ready" — so `None` (absent) is ready, and
/// `Some(false)` is a plugin that says it is still initialising.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    pub ready: Option<bool>,
}

impl Probe {
    pub fn is_ready(&self) -> bool {
        self.ready != Some(false)
    }
}

/// One field: its number and value.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(b: &[u8], i: &mut usize) -> Result<u64, String> {
    let mut v: u64 = 0;
    for shift in 0..10 {
        let Some(&x) = b.get(*i) else {
            return Err("truncated varint".into());
        };
        *i += 1;
        v |= u64::from(x & 0x7f) << (7 * shift);
        if x & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// Walk the fields of a message.
fn fields<'a>(
    b: &'a [u8],
    mut f: impl FnMut(u64, Value<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (num, wire) = (key >> 3, key & 7);
        if num == 0 {
            return Err("field number 0".into());
        }
        let v = match wire {
            0 => Value::Varint(varint(b, &mut i)?),
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                if b.len() - i < n {
                    return Err("truncated fixed field".into());
                }
                i += n;
                Value::Fixed
            }
            2 => {
                let n = varint(b, &mut i)?;
                if n > (b.len() - i) as u64 {
                    return Err("length past the end of the message".into());
                }
                let s = &b[i..i + n as usize];
                i += n as usize;
                Value::Bytes(s)
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        f(num, v)?;
    }
    Ok(())
}

/// Text of a string field: lossy UTF-8, at most [`STRING_MAX`] bytes.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(STRING_MAX)]).into_owned()
}

fn string(v: Value<'_>) -> Result<String, String> {
    match v {
        Value::Bytes(b) => Ok(text(b)),
        _ => Err("a string field of another wire type".into()),
    }
}

pub fn plugin_info(b: &[u8]) -> Result<PluginInfo, String> {
    let mut p = PluginInfo::default();
    fields(b, |n, v| {
        match n {
            1 => p.type_ = string(v)?,
            2 => p.name = string(v)?,
            3 => p.endpoint = string(v)?,
            4 => {
                let s = string(v)?;
                if p.supported_versions.len() < VERSIONS_MAX {
                    p.supported_versions.push(s)
                }
            }
            _ => {}
        }
        Ok(())
    })
    .map_err(|e| format!("garbled PluginInfo: {e}"))?;
    Ok(p)
}

pub fn get_plugin_info(b: &[u8]) -> Result<GetPluginInfo, String> {
    let mut p = GetPluginInfo::default();
    fields(b, |n, v| {
        match n {
            1 => p.name = string(v)?,
            2 => p.vendor_version = string(v)?,
            _ => {}
        }
        Ok(())
    })
    .map_err(|e| format!("garbled GetPluginInfoResponse: {e}"))?;
    Ok(p)
}

pub fn probe(b: &[u8]) -> Result<Probe, String> {
    let mut p = Probe::default();
    fields(b, |n, v| {
        if n == 1 {
            let Value::Bytes(inner) = v else {
                return Err("ready is not a message".into());
            };
            // BoolValue: field 1, varint; absent inside a present wrapper is false.
            let mut ready = false;
            fields(inner, |n, v| {
                if n == 1 {
                    match v {
                        Value::Varint(x) => ready = x != 0,
                        _ => return Err("BoolValue.value is not a varint".into()),
                    }
                }
                Ok(())
            })?;
            p.ready = Some(ready);
        }
        Ok(())
    })
    .map_err(|e| format!("garbled ProbeResponse: {e}"))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_info_as_go_encodes_it() {
        // protoc --encode of PluginInfo{type:"CSIPlugin", name:"hostpath.csi.k8s.io",
        // endpoint:"/var/lib/kubelet/plugins/h/csi.sock", supported_versions:["1.0.0"]}.
        let mut b = vec![0x0a, 9];
        b.extend_from_slice(b"CSIPlugin");
        b.extend_from_slice(&[0x12, 19]);
        b.extend_from_slice(b"hostpath.csi.k8s.io");
        b.extend_from_slice(&[0x1a, 35]);
        b.extend_from_slice(b"/var/lib/kubelet/plugins/h/csi.sock");
        b.extend_from_slice(&[0x22, 5]);
        b.extend_from_slice(b"1.0.0");
        // An unknown varint field and an unknown fixed32 field are skipped.
        b.extend_from_slice(&[0x28, 0x96, 0x01, 0x35, 1, 2, 3, 4]);
        let p = plugin_info(&b).unwrap();
        assert_eq!(p.type_, "CSIPlugin");
        assert_eq!(p.name, "hostpath.csi.k8s.io");
        assert_eq!(p.endpoint, "/var/lib/kubelet/plugins/h/csi.sock");
        assert_eq!(p.supported_versions, vec!["1.0.0"]);
    }

    #[test]
    fn probe_ready_semantics() {
        assert_eq!(probe(&[]).unwrap().ready, None);
        assert!(probe(&[]).unwrap().is_ready());
        assert_eq!(probe(&[0x0a, 2, 0x08, 1]).unwrap().ready, Some(true));
        assert_eq!(probe(&[0x0a, 0]).unwrap().ready, Some(false));
        assert!(!probe(&[0x0a, 2, 0x08, 0]).unwrap().is_ready());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for b in [
            &[0x0a, 200][..],
            &[0xff; 12][..],
            &[0x0b][..],
            &[0x00, 1][..],
            &[0x0d, 1][..],
            &[0x0a, 1, 0x08][..],
        ] {
            assert!(
                plugin_info(b).is_err() || probe(b).is_err() || get_plugin_info(b).is_err(),
                "{b:?}"
            );
            let _ = plugin_info(b);
            let _ = probe(b);
            let _ = get_plugin_info(b);
        }
        assert!(plugin_info(&[0x0a, 200]).is_err());
        assert!(probe(&[0x0a, 1, 0x08]).is_err());
    }
}
