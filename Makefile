# make                      build the static release binaries (./build-static: musl, installing the
#                           target with rustup when it can, else static glibc; it says which)
# make install              install them where NRPE looks
#   PLUGINDIR=/usr/lib/nagios/plugins (default; /usr/lib64/nagios/plugins on RHEL-likes)
#   DESTDIR=/staging/root   (prefix for packaging)
# make deb                  Debian package (packaging/mkdeb; plain dpkg-deb), in target/packages/
# make dist                 release tarball + .sha256 for the Ansible role (packaging/mkdist)
PLUGINDIR ?= /usr/lib/nagios/plugins
DESTDIR ?=
# Where ./build-static puts them (evaluated when used, after the build).
BIN = $(shell ./build-static --print-dir)
CHECKS := $(notdir $(wildcard crates/check_*))

all:
	./build-static >/dev/null

install: all
	install -d $(DESTDIR)$(PLUGINDIR)
	for c in $(CHECKS); do install -m 0755 $(BIN)/$$c $(DESTDIR)$(PLUGINDIR)/$$c; done

deb:
	packaging/mkdeb

dist:
	packaging/mkdist

.PHONY: all install deb dist
