fn main() {
    plugin::main::<check_stale_csi_mounts::Opts>()
}
