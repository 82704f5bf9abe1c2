fn main() {
    plugin::main::<check_iscsi_sessions::Opts>()
}
