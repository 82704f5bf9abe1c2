fn main() {
    plugin::main::<check_storage_kernel_errors::Opts>()
}
