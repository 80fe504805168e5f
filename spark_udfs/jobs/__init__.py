"""The Spark jobs, one module each: what `crcmerkle spark scan|diff|report|plan|copycheck` run.

    scan       scan_replicas: verify replicas, the chunk/block/container/error/volume tables
    hostscan   scan_datanodes: every (host, volume) of an inventory scanned on its own host
    diff       diff_scan / diff_chunks: container -> block -> chunk diff, the repair plan
    report     build_report / format_text: health summary and repair commands
    plan       build_plan: decommission / maintenance counts and the copies they need
    copycheck  copycheck: Ozone keys against their copies, from stored checksums
    passes     whole_groups: partition rows gathered into passes of whole keys (diff, copycheck)
    bookkeeper scan_bookkeeper: BookKeeper bookies verified, their ledgers judged (a
               package: hosts, scan_bookie_hosts: every bookie host of an inventory scanned
               on its own host; plan, bookie_plan: may these bookies go down, counting
               only good copies)
A new job goes here as its own module; its command line goes into spark_udfs/cli/ (one
module per verb), what it shares with the cluster side (sessions, placement, hosts, which
volumes vouch, progress) into spark_udfs/cluster/, and its table schemas next to the scan's.
Importing this package imports none of them (nor Spark).
"""
