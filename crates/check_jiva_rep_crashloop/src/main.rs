fn main() {
    plugin::main::<check_jiva_rep_crashloop::Opts>()
}
