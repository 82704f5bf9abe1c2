//! Issue 29: what an operator installs without building. The project's metadata is written once
//! (packaging/project.env) and every copy agrees with it, no shipped file names example.org or
//! example.invalid; the release workflow passes actionlint; the OCI images (packaging/mkimage:
//! FROM scratch + the static program, one per architecture, and their multi-arch index) are
//! inspected layer by layer and the amd64 one runs under the real podman. (The signed APT
//! repository is in package.rs, the arm64 program under qemu-user in arm64.rs.)

use e2e::{bin_dir, need_root, need_tool, workspace_root, Cmd, Output};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// packaging/project.env as the shell reads it (it is sourced by the packaging scripts).
fn project() -> BTreeMap<String, String> {
    let keys = [
        "PROJECT_NAME",
        "PROJECT_HOMEPAGE",
        "PROJECT_REPOSITORY",
        "PROJECT_IMAGE",
        "PROJECT_APT_URL",
        "PROJECT_MAINTAINER",
        "PROJECT_LICENSE",
        "PROJECT_SUMMARY",
    ];
    let script = format!(
        ". ./packaging/project.env && {}",
        keys.iter()
            .map(|k| format!("printf '%s\\n' \"${k}\""))
            .collect::<Vec<_>>()
            .join(" && ")
    );
    let out = Cmd::new("sh")
        .current_dir(workspace_root())
        .args(["-c", &script])
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    let m: BTreeMap<String, String> = keys
        .iter()
        .map(|k| k.to_string())
        .zip(out.stdout.lines().map(str::to_string))
        .collect();
    for (k, v) in &m {
        assert!(!v.is_empty(), "{k} is empty in packaging/project.env");
    }
    m
}

/// Files under the workspace that ship (in a package, the tarball, an image, the role, the
/// manifests, the docs): everything but the build output, git's own files and the tests.
fn shipped_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let rel = p.strip_prefix(workspace_root()).unwrap().to_path_buf();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        if matches!(&*first, "target" | ".git" | "tests")
            || rel.starts_with("fuzz/target")
            || rel.starts_with("fuzz/corpus")
            || rel.starts_with("fuzz/artifacts")
        {
            continue;
        }
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            shipped_files(&p, out);
        } else if ft.is_file() {
            out.push(p);
        }
    }
}

#[test]
fn metadata_is_written_once_and_no_shipped_file_names_example_domains() {
    let p = project();
    let root = workspace_root();
    // Cargo.toml's copies.
    let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let field = |name: &str| {
        cargo
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} = \"")))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or_else(|| panic!("no {name} in Cargo.toml"))
            .to_string()
    };
    assert_eq!(field("repository"), p["PROJECT_REPOSITORY"]);
    assert_eq!(field("homepage"), p["PROJECT_HOMEPAGE"]);
    assert_eq!(field("license"), p["PROJECT_LICENSE"]);
    // The package templates take them from project.env, never write them.
    for f in ["control", "copyright", "changelog"] {
        let t = std::fs::read_to_string(root.join("packaging/debian").join(f)).unwrap();
        assert!(
            !t.contains("github.com") && !t.contains("noreply"),
            "packaging/debian/{f} writes metadata of its own"
        );
    }
    // Every image a manifest names is the project's.
    let mut images = 0;
    let mut files = Vec::new();
    shipped_files(&root.join("deploy"), &mut files);
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "yaml" || e == "yml"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        for l in text.lines() {
            if let Some(img) = l.trim().strip_prefix("image:") {
                let img = img.trim().trim_matches(['"', '\'']);
                if img == "k8s-storage-checks" {
                    // Kustomize's placeholder: deploy/base/kustomization.yaml's `images:` names
                    // the real one (checked below).
                    assert!(
                        f.starts_with(root.join("deploy/base"))
                            || f.starts_with(root.join("deploy/overlays")),
                        "{}: the bare image name outside the kustomize tree",
                        f.display()
                    );
                } else if img.contains("k8s-storage-checks") {
                    assert!(
                        img.starts_with(&format!("{}:", p["PROJECT_IMAGE"])),
                        "{}: image {img} is not PROJECT_IMAGE",
                        f.display()
                    );
                    images += 1;
                }
            }
        }
    }
    assert!(images >= 2, "the DaemonSets name no image");
    let kustomization =
        std::fs::read_to_string(root.join("deploy/base/kustomization.yaml")).unwrap();
    assert!(
        kustomization.contains(&format!("newName: {}\n", p["PROJECT_IMAGE"])),
        "deploy/base/kustomization.yaml: images: newName is not PROJECT_IMAGE"
    );
    // `grep -rE 'example\.(org|invalid)'` over what ships finds nothing.
    let mut all = Vec::new();
    shipped_files(&root, &mut all);
    assert!(all.len() > 50, "{} files", all.len());
    let mut hits = Vec::new();
    for f in &all {
        let Ok(text) = std::fs::read(f) else { continue };
        let text = String::from_utf8_lossy(&text);
        for (i, l) in text.lines().enumerate() {
            if l.contains("example.org") || l.contains("example.invalid") {
                hits.push(format!("{}:{}: {l}", f.display(), i + 1));
            }
        }
    }
    assert!(hits.is_empty(), "example domains shipped: {hits:#?}");
}

#[test]
fn release_workflow_passes_actionlint_and_publishes_both_arches() {
    let t = "release_workflow_passes_actionlint_and_publishes_both_arches";
    if !need_tool(t, "actionlint") {
        return;
    }
    let root = workspace_root();
    let wf = root.join(".github/workflows/release.yml");
    let out = Cmd::new("actionlint")
        .args(["-color=false"])
        .arg(&wf)
        .current_dir(&root)
        .run();
    assert_eq!(out.code, 0, "actionlint: {out:?}");
    // actionlint does find a workflow's mistake (here a step that does not exist).
    let bad = tempfile::tempdir().unwrap();
    let broken = std::fs::read_to_string(&wf).unwrap().replace(
        "steps.image.outputs.layout",
        "steps.no_such_step.outputs.layout",
    );
    std::fs::create_dir_all(bad.path().join(".github/workflows")).unwrap();
    let bad_wf = bad.path().join(".github/workflows/release.yml");
    std::fs::write(&bad_wf, broken).unwrap();
    let out = Cmd::new("actionlint")
        .args(["-color=false"])
        .arg(&bad_wf)
        .current_dir(bad.path())
        .run();
    assert_eq!(
        out.code, 1,
        "actionlint accepted a broken workflow: {out:?}"
    );
    // What it does: on a tag, both arches built and tested, everything published, signed.
    let y: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&wf).unwrap()).unwrap();
    assert!(y["on"]["push"]["tags"].is_sequence(), "not on a tag");
    let arches: Vec<&str> = y["jobs"]["build"]["strategy"]["matrix"]["arch"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(arches, ["amd64", "arm64"]);
    let text = std::fs::read_to_string(&wf).unwrap();
    for needle in [
        "./build-static --arch",
        "cargo test",
        "arm64::",
        "packaging/mkdeb",
        "packaging/mkdist",
        "packaging/mkimage",
        "packaging/mkrepo",
        "SHA256SUMS.asc",
        "--detach-sign",
        "skopeo copy --all",
        "gh release create",
        "actions/deploy-pages",
        "secrets.RELEASE_SIGNING_KEY",
        "packaging/project.env",
    ] {
        assert!(text.contains(needle), "release.yml lacks {needle}");
    }
}

fn json(o: Output, what: &str) -> Value {
    assert_eq!(o.code, 0, "{what}: {o:?}");
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {}", o.stdout))
}

/// A directory removed when dropped.
struct Lower(PathBuf);
impl Lower {
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for Lower {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A blob of an OCI layout by its digest.
fn blob(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

#[test]
fn oci_images_per_arch_and_index_are_inspected_and_run_with_podman() {
    let t = "oci_images_per_arch_and_index_are_inspected_and_run_with_podman";
    if !need_root(t) || !["buildah", "skopeo", "tar"].iter().all(|x| need_tool(t, x)) {
        return;
    }
    let Some(arm) = crate::arm64::arm_dir(t) else {
        return;
    };
    let p = project();
    let version = env!("CARGO_PKG_VERSION");
    // podman names an `oci:` image after its path, and a name must be lowercase: a directory of
    // this test's own under /tmp (removed when it ends), not tempfile's mixed-case one.
    let work =
        Lower(std::env::temp_dir().join(format!("k8s-storage-checks-oci-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(work.path());
    std::fs::create_dir_all(work.path()).unwrap();
    let started = Instant::now();
    let o = Cmd::new(workspace_root().join("packaging/mkimage"))
        .env("BIN_DIR_amd64", bin_dir())
        .env("BIN_DIR_arm64", &arm)
        .env("OUT_DIR", work.path())
        .run();
    assert_eq!(o.code, 0, "packaging/mkimage: {o:?}");
    println!(
        "packaging/mkimage (amd64 + arm64 + index): {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let layout = PathBuf::from(o.stdout.lines().last().unwrap().trim());
    let tag = format!("{version}-plain");
    let oci = |t: &str| format!("oci:{}:{t}", layout.display());

    // The index: both architectures, linux.
    let index = json(
        Cmd::new("skopeo")
            .args(["inspect", "--raw", &oci(&tag)])
            .run(),
        "skopeo inspect --raw",
    );
    assert_eq!(
        index["mediaType"], "application/vnd.oci.image.index.v1+json",
        "{index}"
    );
    let mut plats: Vec<(String, String)> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["platform"]["os"].as_str().unwrap().to_string(),
                m["platform"]["architecture"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    plats.sort();
    assert_eq!(
        plats,
        [
            ("linux".to_string(), "amd64".to_string()),
            ("linux".to_string(), "arm64".to_string())
        ]
    );

    for (arch, machine) in [("amd64", 0x3eu16), ("arm64", 0xb7)] {
        let info = json(
            Cmd::new("skopeo")
                .args(["inspect", "--override-arch", arch, &oci(&tag)])
                .run(),
            "skopeo inspect",
        );
        assert_eq!(info["Architecture"], arch, "{info}");
        assert_eq!(info["Os"], "linux");
        let labels = &info["Labels"];
        for (label, want) in [
            ("org.opencontainers.image.title", p["PROJECT_NAME"].as_str()),
            ("org.opencontainers.image.source", &p["PROJECT_REPOSITORY"]),
            ("org.opencontainers.image.url", &p["PROJECT_HOMEPAGE"]),
            ("org.opencontainers.image.licenses", &p["PROJECT_LICENSE"]),
            ("org.opencontainers.image.authors", &p["PROJECT_MAINTAINER"]),
            ("org.opencontainers.image.version", version),
        ] {
            assert_eq!(labels[label], want, "{arch}: {label}: {labels}");
        }
        let layers = info["Layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{arch}: FROM scratch + one layer: {info}");
        let cfg = json(
            Cmd::new("skopeo")
                .args(["inspect", "--config", "--override-arch", arch, &oci(&tag)])
                .run(),
            "skopeo inspect --config",
        );
        let c = &cfg["config"];
        assert_eq!(c["User"], "65534:65534", "{arch}: not non-root: {cfg}");
        assert_eq!(
            c["Entrypoint"],
            serde_json::json!(["/usr/local/bin/k8s-storage-checks-textfile"]),
            "{arch}"
        );
        assert_eq!(cfg["architecture"], arch);
        // The layer: the program of this architecture, every check's name, nothing else.
        let layer = blob(&layout, layers[0].as_str().unwrap());
        let list = Cmd::new("tar").arg("-tzvf").arg(&layer).run();
        assert_eq!(list.code, 0, "{list:?}");
        for c in e2e::all_checks() {
            assert!(
                list.stdout
                    .lines()
                    .any(|l| l
                        .contains(&format!("usr/lib/nagios/plugins/{c} -> k8s-storage-checks"))),
                "{arch}: {c} missing:\n{}",
                list.stdout
            );
        }
        assert!(
            list.stdout
                .contains("usr/local/bin/k8s-storage-checks-textfile -> ../../lib/nagios/plugins/k8s-storage-checks"),
            "{}",
            list.stdout
        );
        let x = work.path().join(format!("x-{arch}"));
        std::fs::create_dir(&x).unwrap();
        let o = Cmd::new("tar")
            .arg("-xzf")
            .arg(&layer)
            .arg("-C")
            .arg(&x)
            .arg("usr/lib/nagios/plugins/k8s-storage-checks")
            .run();
        assert_eq!(o.code, 0, "{o:?}");
        let b = std::fs::read(x.join("usr/lib/nagios/plugins/k8s-storage-checks")).unwrap();
        assert_eq!(u16::from_le_bytes([b[18], b[19]]), machine, "{arch}");
    }

    // Run with the real podman (its own storage under the test's directory, no network). This
    // machine's cgroup hierarchy is hybrid (v1 controllers + an empty v2), which crun refuses
    // ("cgroups in hybrid mode not supported"): runc with cgroupfs runs it; its file and process
    // limits are below podman's defaults, so the ulimits are given. The arm64 image would need
    // a binfmt_misc handler for qemu-aarch64 (a machine-wide kernel setting this test does not
    // make): its program is run under qemu-user in arm64.rs instead.
    if !["podman", "runc"].iter().all(|x| need_tool(t, x)) {
        return;
    }
    let store = work.path().join("podman");
    let podman = |args: &[&str]| {
        Cmd::new("podman")
            .arg("--root")
            .arg(store.join("root"))
            .arg("--runroot")
            .arg(store.join("run"))
            .args([
                "--storage-driver",
                "vfs",
                "--cgroup-manager",
                "cgroupfs",
                "--runtime",
                "runc",
                "run",
                "--rm",
                "--network",
                "none",
                "--pull",
                "never",
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "nproc=4096:4096",
            ])
            .args(args)
            .run()
    };
    let image = oci(&format!("{tag}-amd64"));
    // A check through the image, as the unprivileged default user: a real answer by the protocol.
    let out = podman(&[
        "--entrypoint",
        "/usr/lib/nagios/plugins/check_iscsi_sessions",
        &image,
        "-t",
        "10",
    ]);
    println!("podman run check_iscsi_sessions: {out:?}");
    out.assert_protocol("ISCSI_SESSIONS");
    // The entrypoint is the textfile runner.
    let out = podman(&[&image, "--help"]);
    assert!(
        out.stdout.contains("textfile-collector") && out.stdout.contains("--dir"),
        "{out:?}"
    );
    println!("{t}: {:.1}s", started.elapsed().as_secs_f64());
}
