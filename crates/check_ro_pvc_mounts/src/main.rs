fn main() {
    plugin::main::<check_ro_pvc_mounts::Opts>()
}
