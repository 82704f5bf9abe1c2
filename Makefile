# make                      build the static release program (./build-static: musl, installing the
#                           target with rustup when it can, else static glibc; it says which)
# make install              install it where NRPE looks, and the checks' run directory
# make install-caps         then give the privileged copies their file capabilities
#   PLUGINDIR=/usr/lib/nagios/plugins (default; /usr/lib64/nagios/plugins on RHEL-likes)
#   AGENT_USER=nagios AGENT_GROUP=nagios (the user NRPE/Icinga runs the checks as; RHEL: nrpe)
#   DESTDIR=/staging/root   (prefix for packaging)
#   INSTALL_OWNER=          (staging as a non-root user: no chown; the package sets the owner)
#
# One program, k8s-storage-checks, is every check (it runs the check it is called by). A file
# capability belongs to the file, so it is installed once per capability set, as `k8s-storage-checks
# --list` says: k8s-storage-checks (none), k8s-storage-checks-cap_dac_read_search,
# k8s-storage-checks-cap_syslog; each check's name is a hard link to the copy with exactly the
# capabilities it needs (so `getcap <check>` and the file's mode answer for the name itself).
# Only the agent may run a privileged copy: the copies with a capability (or a sudo rule, in the
# role's sudo mode) are installed root:$(AGENT_GROUP) 0750, the plain one root:root 0755. The
# checks refuse to run with more privilege than their real user unless that user is root or in
# the group owning the file, and a copy keeps only the capabilities of the check it runs. The
# capabilities are applied by install-caps (a capability is lost whenever the file is replaced or
# chowned: run it after every install).
# make deb                  Debian package (packaging/mkdeb; plain dpkg-deb), in target/packages/
# make dist                 release tarball + .sha256 for the Ansible role (packaging/mkdist)
#   ARCH=amd64|arm64        for deb and dist: the architecture (default the machine's); arm64 is
#                           cross-built (./build-static --arch arm64) and run under qemu-user
# make image                the FROM scratch image for amd64 and arm64 and their multi-arch index,
#                           an OCI layout in target/packages/oci (packaging/mkimage; buildah)
# make apt-repo             both architectures' packages and a signed APT repository of them in
#                           target/packages/apt (packaging/mkrepo; SIGNING_KEY=<gpg key id>)
PLUGINDIR ?= /usr/lib/nagios/plugins
DESTDIR ?=
AGENT_USER ?= nagios
AGENT_GROUP ?= nagios
INSTALL_OWNER ?= -o root -g $(AGENT_GROUP)
# Stuck-probe markers (owned by the agent user, 0750), recreated at boot through tmpfiles.d.
RUNDIR ?= /run/k8s-storage-checks
TMPFILESDIR ?= /etc/tmpfiles.d
# Where ./build-static puts the program (evaluated when used, after the build).
BIN = $(shell ./build-static --print-dir)
PROGRAM := k8s-storage-checks

all:
	./build-static >/dev/null

# Each copy first, then every check name as a hard link to its copy (installing a copy replaces
# its file, so the links are made again every time).
install: all
	install -d $(DESTDIR)$(PLUGINDIR)
	test -x $(BIN)/$(PROGRAM)
	$(BIN)/$(PROGRAM) --list | while read -r name copy caps; do echo "$$copy $$caps"; done | sort -u \
	| while read -r copy caps; do \
	    if [ -n "$$caps" ]; then \
	        install $(INSTALL_OWNER) -m 0750 $(BIN)/$(PROGRAM) $(DESTDIR)$(PLUGINDIR)/$$copy; \
	    else \
	        install -m 0755 $(BIN)/$(PROGRAM) $(DESTDIR)$(PLUGINDIR)/$$copy; \
	    fi || exit 1; \
	done
	$(BIN)/$(PROGRAM) --list | while read -r name copy caps; do \
	    case $$name in check_*) ln -f $(DESTDIR)$(PLUGINDIR)/$$copy $(DESTDIR)$(PLUGINDIR)/$$name || exit 1 ;; esac; \
	done
	install -d $(DESTDIR)$(TMPFILESDIR)
	printf '# k8s-storage-checks: stuck-probe markers, owned by the agent user.\nd %s 0750 %s %s -\n' \
	    $(RUNDIR) $(AGENT_USER) $(AGENT_GROUP) > $(DESTDIR)$(TMPFILESDIR)/k8s-storage-checks.conf
	chmod 0644 $(DESTDIR)$(TMPFILESDIR)/k8s-storage-checks.conf
	if [ -z "$(DESTDIR)" ]; then install -d -o $(AGENT_USER) -g $(AGENT_GROUP) -m 0750 $(RUNDIR); fi

# The installed program says which copy gets which capabilities.
install-caps:
	test -x $(DESTDIR)$(PLUGINDIR)/$(PROGRAM)
	$(DESTDIR)$(PLUGINDIR)/$(PROGRAM) --list | while read -r name copy caps; do \
	    [ -z "$$caps" ] || setcap "$$caps=ep" $(DESTDIR)$(PLUGINDIR)/$$copy || exit 1; \
	done

deb:
	packaging/mkdeb

dist:
	packaging/mkdist

image:
	packaging/mkimage

apt-repo:
	ARCH=amd64 packaging/mkdeb
	ARCH=arm64 packaging/mkdeb
	packaging/mkrepo

.PHONY: all install install-caps deb dist image apt-repo
