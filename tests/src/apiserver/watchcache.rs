//! ConfigMaps with a watch cache, for check_watch_cache.
//!
//! A [`ConfigMapStore`] is the "etcd" of one or more test API servers: writes (PATCH with a
//! merge or strategic-merge patch, POST) go to it and are consistent at once. Each server serving
//! it has its own [`WatchCache`]: reads with `resourceVersion=0` are answered from the cache's
//! copy, which follows the store's write log as its [`CacheMode`] says — at once (healthy), only
//! writes older than a delay (delayed: a write is applied by the first RV=0 read that arrives
//! after its due time, nobody sleeps), or never (frozen, the incident's kine/dqlite feed break).
//! Reads without `resourceVersion=0` are served from the store, as a quorum read would be.

use super::{ApiServer, Ctx, Request, Response};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a server's watch cache follows writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CacheMode {
    /// Every write is visible to RV=0 reads at once.
    Healthy,
    /// A write becomes visible to RV=0 reads this long after it was made.
    Delayed(Duration),
    /// No write made from now on (or still pending) ever becomes visible.
    Frozen,
}

type Key = (String, String);

#[derive(Default)]
struct StoreInner {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    /// Every write in order: when, which object, its state after the write.
    writes: Vec<(Instant, Key, Value)>,
}

/// The consistent ConfigMap store, shared by the servers of one "cluster".
#[derive(Default)]
pub struct ConfigMapStore {
    inner: Mutex<StoreInner>,
}

impl ConfigMapStore {
    pub fn new() -> Arc<ConfigMapStore> {
        Arc::new(ConfigMapStore {
            inner: Mutex::new(StoreInner {
                rv: 5000,
                ..Default::default()
            }),
        })
    }

    /// Create (or replace) a ConfigMap `ns/name` with `data`, as a write.
    pub fn put(&self, ns: &str, name: &str, data: Value) -> Value {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
                         "creationTimestamp": super::fixtures::ago(3600)},
            "data": data});
        self.write((ns.into(), name.into()), obj)
    }

    /// The current (consistent) state of `ns/name`.
    pub fn get(&self, ns: &str, name: &str) -> Option<Value> {
        let i = self.inner.lock().unwrap();
        i.objects.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// The number of writes so far.
    pub fn writes(&self) -> usize {
        self.inner.lock().unwrap().writes.len()
    }

    fn write(&self, key: Key, mut obj: Value) -> Value {
        let mut i = self.inner.lock().unwrap();
        i.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(i.rv.to_string());
        i.objects.insert(key.clone(), obj.clone());
        i.writes.push((Instant::now(), key, obj.clone()));
        obj
    }
}

struct CacheState {
    mode: CacheMode,
    view: BTreeMap<Key, Value>,
    /// Writes of the store's log applied so far.
    applied: usize,
}

/// One server's watch cache of a [`ConfigMapStore`].
pub struct WatchCache {
    store: Arc<ConfigMapStore>,
    state: Mutex<CacheState>,
}

impl WatchCache {
    fn new(store: Arc<ConfigMapStore>, mode: CacheMode) -> WatchCache {
        let (view, applied) = {
            let i = store.inner.lock().unwrap();
            (i.objects.clone(), i.writes.len())
        };
        WatchCache {
            store,
            state: Mutex::new(CacheState {
                mode,
                view,
                applied,
            }),
        }
    }

    /// Change how the cache follows writes from now on (pending writes included).
    pub fn set_mode(&self, mode: CacheMode) {
        self.state.lock().unwrap().mode = mode;
    }

    /// Catch up with the store as the mode allows at `now`, then read `ns/name`.
    pub fn read(&self, ns: &str, name: &str) -> Option<Value> {
        let now = Instant::now();
        let mut st = self.state.lock().unwrap();
        let delay = match st.mode {
            CacheMode::Healthy => Some(Duration::ZERO),
            CacheMode::Delayed(d) => Some(d),
            CacheMode::Frozen => None,
        };
        if let Some(delay) = delay {
            let i = self.store.inner.lock().unwrap();
            while let Some((at, key, obj)) = i.writes.get(st.applied) {
                if *at + delay > now {
                    break;
                }
                st.view.insert(key.clone(), obj.clone());
                st.applied += 1;
            }
        }
        st.view.get(&(ns.to_string(), name.to_string())).cloned()
    }
}

/// RFC 7386 JSON merge patch (for annotations, strategic merge does the same).
fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn not_found(name: &str) -> Response {
    Response::status(404, "NotFound", &format!("configmaps \"{name}\" not found"))
}

fn object(req: &Request, store: &ConfigMapStore, cache: &WatchCache) -> Response {
    let (ns, name) = (req.param("ns").unwrap(), req.param("name").unwrap());
    let key = (ns.to_string(), name.to_string());
    match req.method.as_str() {
        "GET" => {
            let found = if req.q("resourceVersion") == Some("0") {
                cache.read(ns, name)
            } else {
                store.get(ns, name)
            };
            found
                .map(|o| Response::json(200, &o))
                .unwrap_or_else(|| not_found(name))
        }
        "PATCH" => {
            let ct = req.content_type.split(';').next().unwrap_or("").trim();
            if ct != "application/merge-patch+json"
                && ct != "application/strategic-merge-patch+json"
            {
                return Response::status(
                    415,
                    "UnsupportedMediaType",
                    &format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json (got '{ct}')"),
                );
            }
            let Ok(patch) = serde_json::from_slice::<Value>(&req.body) else {
                return Response::status(400, "BadRequest", "error decoding patch: invalid JSON");
            };
            let Some(mut obj) = store.get(ns, name) else {
                return not_found(name);
            };
            merge_patch(&mut obj, &patch);
            Response::json(200, &store.write(key, obj))
        }
        m => Response::status(
            405,
            "MethodNotAllowed",
            &format!("method {m} not supported here"),
        ),
    }
}

fn collection(req: &Request, store: &ConfigMapStore) -> Response {
    let ns = req.param("ns").unwrap();
    if req.method != "POST" {
        return Response::status(405, "MethodNotAllowed", "only POST is served here");
    }
    if !req.content_type.starts_with("application/json") {
        return Response::status(415, "UnsupportedMediaType", "expected application/json");
    }
    let Ok(mut obj) = serde_json::from_slice::<Value>(&req.body) else {
        return Response::status(400, "BadRequest", "invalid JSON");
    };
    let Some(name) = obj["metadata"]["name"].as_str().map(|s| s.to_string()) else {
        return Response::status(422, "Invalid", "metadata.name: Required value");
    };
    if obj["kind"] != "ConfigMap" {
        return Response::status(400, "BadRequest", "kind must be ConfigMap");
    }
    if store.get(ns, &name).is_some() {
        return Response::status(
            409,
            "AlreadyExists",
            &format!("configmaps \"{name}\" already exists"),
        );
    }
    obj["metadata"]["namespace"] = json!(ns);
    obj["metadata"]["uid"] = json!(format!("uid-{ns}-{name}"));
    obj["metadata"]["creationTimestamp"] = json!(super::fixtures::ago(0));
    Response::json(201, &store.write((ns.to_string(), name), obj))
}

impl ApiServer {
    /// Serve ConfigMaps from `store` (GET one, PATCH one, POST to the collection), RV=0 reads
    /// from a new watch cache of it in `mode`; the handle changes the mode later.
    pub fn configmaps(&self, store: &Arc<ConfigMapStore>, mode: CacheMode) -> Arc<WatchCache> {
        let cache = Arc::new(WatchCache::new(Arc::clone(store), mode));
        let (s, c) = (Arc::clone(store), Arc::clone(&cache));
        self.route(
            "/api/v1/namespaces/{ns}/configmaps/{name}",
            Arc::new(move |req: &Request, _: &Ctx| object(req, &s, &c)),
        );
        let s = Arc::clone(store);
        self.route(
            "/api/v1/namespaces/{ns}/configmaps",
            Arc::new(move |req: &Request, _: &Ctx| collection(req, &s)),
        );
        cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_sets_and_removes() {
        let mut o = json!({"metadata": {"name": "a", "annotations": {"x": "1", "y": "2"}}});
        merge_patch(
            &mut o,
            &json!({"metadata": {"annotations": {"x": null, "z": "3"}}}),
        );
        assert_eq!(o["metadata"]["annotations"], json!({"y": "2", "z": "3"}));
        assert_eq!(o["metadata"]["name"], "a");
    }

    #[test]
    fn cache_modes() {
        let store = ConfigMapStore::new();
        store.put("ns", "a", json!({"v": "1"}));
        let healthy = WatchCache::new(Arc::clone(&store), CacheMode::Healthy);
        let frozen = WatchCache::new(Arc::clone(&store), CacheMode::Frozen);
        let delayed = WatchCache::new(
            Arc::clone(&store),
            CacheMode::Delayed(Duration::from_secs(3600)),
        );
        store.put("ns", "a", json!({"v": "2"}));
        assert_eq!(healthy.read("ns", "a").unwrap()["data"]["v"], "2");
        assert_eq!(frozen.read("ns", "a").unwrap()["data"]["v"], "1");
        assert_eq!(delayed.read("ns", "a").unwrap()["data"]["v"], "1");
        delayed.set_mode(CacheMode::Delayed(Duration::ZERO));
        assert_eq!(delayed.read("ns", "a").unwrap()["data"]["v"], "2");
        frozen.set_mode(CacheMode::Healthy);
        assert_eq!(frozen.read("ns", "a").unwrap()["data"]["v"], "2");
        assert!(healthy.read("ns", "b").is_none());
    }
}
