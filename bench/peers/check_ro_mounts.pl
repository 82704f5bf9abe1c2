#!/usr/bin/perl
# What users run today: a check_ro_mounts.pl-style plugin (flags every "ro" in /proc/mounts).
use strict;
use warnings;
my $file = $ARGV[0] // '/proc/mounts';
open(my $fh, '<', $file) or do { print "RO_MOUNTS UNKNOWN - cannot open $file\n"; exit 3 };
my @ro;
while (my $line = <$fh>) {
    my ($dev, $mp, $type, $opts) = split /\s+/, $line;
    next unless defined $opts;
    next if $type =~ /^(proc|sysfs|tmpfs|devtmpfs|cgroup2?|squashfs|iso9660)$/;
    push @ro, $mp if $opts =~ /(^|,)ro(,|$)/;
}
close $fh;
if (@ro) { print "RO_MOUNTS CRITICAL - ", scalar(@ro), " read-only: @ro\n"; exit 2 }
print "RO_MOUNTS OK - no read-only mounts\n";
exit 0;
