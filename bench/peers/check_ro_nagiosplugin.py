#!/usr/bin/env python3
"""What users run today: a minimal Python nagiosplugin check (read-only mounts in /proc/mounts)."""
import nagiosplugin


class Mounts(nagiosplugin.Resource):
    def probe(self):
        ro = 0
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 3 and "ro" in parts[3].split(","):
                    ro += 1
        return [nagiosplugin.Metric("ro_mounts", ro, min=0)]


@nagiosplugin.guarded
def main():
    nagiosplugin.Check(Mounts(), nagiosplugin.ScalarContext("ro_mounts", "0", "0")).main()


if __name__ == "__main__":
    main()
