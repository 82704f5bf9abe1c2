# make                      build the static release binaries
# make install              install them where NRPE looks
#   PLUGINDIR=/usr/lib/nagios/plugins (default; /usr/lib64/nagios/plugins on RHEL-likes)
#   DESTDIR=/staging/root   (prefix for packaging)
PLUGINDIR ?= /usr/lib/nagios/plugins
DESTDIR ?=
BIN := target/$(or $(CARGO_BUILD_TARGET),x86_64-unknown-linux-musl)/release
CHECKS := $(notdir $(wildcard crates/check_*))

all:
	cargo build --release --workspace --bins

install: all
	install -d $(DESTDIR)$(PLUGINDIR)
	for c in $(CHECKS); do install -m 0755 $(BIN)/$$c $(DESTDIR)$(PLUGINDIR)/$$c; done

.PHONY: all install
