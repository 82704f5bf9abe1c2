fn main() {
    plugin::main::<check_watch_cache::Opts>()
}
