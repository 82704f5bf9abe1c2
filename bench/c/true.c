/* The start-up floor: a static `true` (issue 34). /bin/true is a dynamic glibc binary whose
 * loader alone costs ~0.5 ms; this is what starting any static program costs at least. */
int main(void) { return 0; }
