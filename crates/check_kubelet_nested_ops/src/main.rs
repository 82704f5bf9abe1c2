fn main() {
    plugin::main::<check_kubelet_nested_ops::Opts>()
}
