# make                      build the static release binaries (./build-static: musl, installing the
#                           target with rustup when it can, else static glibc; it says which)
# make install              install them where NRPE looks, and the checks' run directory
# make install-caps         then give the privileged checks their file capabilities
#   PLUGINDIR=/usr/lib/nagios/plugins (default; /usr/lib64/nagios/plugins on RHEL-likes)
#   AGENT_USER=nagios AGENT_GROUP=nagios (the user NRPE/Icinga runs the checks as; RHEL: nrpe)
#   DESTDIR=/staging/root   (prefix for packaging)
#   INSTALL_OWNER=          (staging as a non-root user: no chown; the package sets the owner)
#
# Only the agent may run a privileged binary: the checks that get a file capability (or a sudo
# rule, in the role's sudo mode) are installed root:$(AGENT_GROUP) 0750, every other one
# root:root 0755. The checks refuse to run with more privilege than their real user unless that
# user is root or in the group owning the binary. The capabilities are applied by install-caps
# (a capability is lost whenever the file is replaced or chowned: run it after every install).
# make deb                  Debian package (packaging/mkdeb; plain dpkg-deb), in target/packages/
# make dist                 release tarball + .sha256 for the Ansible role (packaging/mkdist)
PLUGINDIR ?= /usr/lib/nagios/plugins
DESTDIR ?=
AGENT_USER ?= nagios
AGENT_GROUP ?= nagios
INSTALL_OWNER ?= -o root -g $(AGENT_GROUP)
# Stuck-probe markers (owned by the agent user, 0750), recreated at boot through tmpfiles.d.
RUNDIR ?= /run/k8s-storage-checks
TMPFILESDIR ?= /etc/tmpfiles.d
# The privileged checks and their capabilities (the Ansible role's k8s_storage_checks_capabilities).
PRIVILEGED := check_ro_pvc_mounts check_stale_csi_mounts check_storage_kernel_errors
CAPS_check_ro_pvc_mounts := cap_dac_read_search
CAPS_check_stale_csi_mounts := cap_dac_read_search
CAPS_check_storage_kernel_errors := cap_syslog
# Where ./build-static puts them (evaluated when used, after the build).
BIN = $(shell ./build-static --print-dir)
CHECKS := $(notdir $(wildcard crates/check_*))

all:
	./build-static >/dev/null

install: all
	install -d $(DESTDIR)$(PLUGINDIR)
	for c in $(CHECKS); do \
	    case " $(PRIVILEGED) " in \
	    *" $$c "*) install $(INSTALL_OWNER) -m 0750 $(BIN)/$$c $(DESTDIR)$(PLUGINDIR)/$$c ;; \
	    *) install -m 0755 $(BIN)/$$c $(DESTDIR)$(PLUGINDIR)/$$c ;; \
	    esac || exit 1; \
	done
	install -d $(DESTDIR)$(TMPFILESDIR)
	printf '# k8s-storage-checks: stuck-probe markers, owned by the agent user.\nd %s 0750 %s %s -\n' \
	    $(RUNDIR) $(AGENT_USER) $(AGENT_GROUP) > $(DESTDIR)$(TMPFILESDIR)/k8s-storage-checks.conf
	chmod 0644 $(DESTDIR)$(TMPFILESDIR)/k8s-storage-checks.conf
	if [ -z "$(DESTDIR)" ]; then install -d -o $(AGENT_USER) -g $(AGENT_GROUP) -m 0750 $(RUNDIR); fi

install-caps:
	$(foreach c,$(filter $(PRIVILEGED),$(CHECKS)),setcap $(CAPS_$(c))=ep $(DESTDIR)$(PLUGINDIR)/$(c) &&) true

deb:
	packaging/mkdeb

dist:
	packaging/mkdist

.PHONY: all install install-caps deb dist
