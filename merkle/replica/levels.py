"""The level of every scan finding: `error` or `warning`, in one table (LEVELS).

The rule: a finding is an **error** where Apache Ozone's own datanode would mark the replica
UNHEALTHY, where data is damaged, or where crcmerkle could not verify what Ozone verifies; it
is a **warning** where Ozone would not mark the replica unhealthy and the data is intact
(derived metadata Ozone rebuilds itself, a file Ozone's scanner never looks at, a container
state Ozone never data-scans). A warning is reported (text, JSON, the Spark tables) but leaves
the replica ok and the exit status 0; `--strict` counts warnings as errors.

Both layouts share the table. The one kind whose layout could matter, a missing or corrupt
`.tree`, is derived on both: on Ozone volumes the datanode rebuilds it on its next data scan
(ContainerChecksumTreeManager reads a missing file as empty and overwrites an unparsable one);
on the crcmerkle layout the next `crcmerkle scan` that writes (the default) rebuilds it from
the verified data, and reports the warning in that same run. On both, the tombstones (deleted
blocks) only the tree held are lost with it, exactly as in Ozone; a lost tombstone makes the
replica's value differ from its peers', which the diff reports as a mismatch (an error of its
own), so the warning hides nothing.

A kind whose level depends on the case has an entry `KIND:case` next to `KIND` (the usual
case): CONTAINER_NOT_SCANNED is a warning for a container state Ozone never data-scans, but an
error for a schema V1/V2 replica, which Ozone does scan and crcmerkle cannot read.

Kinds missing from the table (added later, or by a newer version) are errors: an unknown
finding is never waved through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet

__all__ = [
    "ERROR",
    "LEVELS",
    "Level",
    "NOT_SCANNED_KINDS",
    "SEVERITIES",
    "WARNING",
    "counts_as_failure",
    "severity_of",
    "warning_kinds",
]

ERROR = "error"
WARNING = "warning"
SEVERITIES = (ERROR, WARNING)


@dataclass(frozen=True)
class Level:
    """One finding kind's level: its severity, why (one line), what Ozone's datanode does
    in the same case, and whether the replica's data was read at all (False: its tree is
    no observation of the data, so the Spark report leaves it out of the comparison)."""

    severity: str
    why: str
    ozone: str
    data_scanned: bool = True


#: kind (or `KIND:case`) -> Level. docs/findings.md's "Findings and their levels" table is this
#: table (a test keeps the two equal).
LEVELS: Dict[str, Level] = {
    # -- data: what Ozone's data scanner (KeyValueContainerCheck) reports ----------------
    "CORRUPT_CHUNK": Level(
        ERROR,
        "a window checksum differs: the data is damaged",
        "CORRUPT_CHUNK: replica marked UNHEALTHY",
    ),
    "MISSING_CHUNK": Level(
        ERROR,
        "no byte of a recorded chunk is in its file: data lost",
        "MISSING_CHUNK: replica marked UNHEALTHY",
    ),
    "INCONSISTENT_CHUNK_LENGTH": Level(
        ERROR,
        "fewer bytes than recorded: data lost",
        "INCONSISTENT_CHUNK_LENGTH: replica marked UNHEALTHY",
    ),
    "MISSING_DATA_FILE": Level(
        ERROR,
        "a block's file is gone (its first chunk is not empty): data lost",
        "MISSING_DATA_FILE: replica marked UNHEALTHY",
    ),
    "UNREADABLE_DATA_FILE": Level(
        ERROR,
        "an I/O error reading a block file: its data cannot be verified",
        "an I/O error while verifying a chunk is CORRUPT_CHUNK: UNHEALTHY",
    ),
    "NOT_A_REGULAR_FILE": Level(
        ERROR,
        "a link, FIFO, device or directory where a replica file should be: never "
        "read, so not verified (and a link in a replica is an attack or damage)",
        "reads through a link (a file outside the replica); other types fail the read: "
        "CORRUPT_CHUNK, UNHEALTHY",
    ),
    # -- block metadata (crcmerkle: `.blocks`; Ozone: the volume's block_data rows) -------
    "METADATA_MISSING": Level(
        ERROR,
        "the `.blocks` file is gone: nothing of the replica can be verified",
        "(crcmerkle layout only; Ozone keeps block metadata in RocksDB, and an "
        "unreadable DB is INACCESSIBLE_DB: UNHEALTHY)",
    ),
    "METADATA_CORRUPT": Level(
        ERROR,
        "block metadata that does not decode: the records of the data are damaged",
        "an undecodable block_data value is skipped silently: the replica stays HEALTHY "
        "(an Ozone blind spot)",
    ),
    "METADATA_UNREADABLE": Level(
        ERROR,
        "an I/O error on the block metadata: nothing of the replica can be verified",
        "INACCESSIBLE_DB: UNHEALTHY",
    ),
    "METADATA_UNSUPPORTED": Level(
        ERROR,
        "a `.blocks` of a newer format: nothing of the replica can be verified",
        "(not an Ozone file)",
    ),
    # -- the Merkle tree: derived metadata ----------------------------------------------
    "TREE_MISSING": Level(
        WARNING,
        "the `.tree` is derived: rebuilt from the verified data by the next scan "
        "that writes (Ozone's own, or `crcmerkle scan` on its layout)",
        "not a scan error; the next data scan writes a new `.tree`",
    ),
    "TREE_CORRUPT": Level(
        WARNING,
        "the `.tree` is derived: rebuilt from the verified data by the next scan that writes",
        "not a scan error; the next data scan overwrites it (logged)",
    ),
    "TREE_UNREADABLE": Level(
        ERROR,
        "an I/O error on the `.tree`: it can be neither served to peers nor rebuilt "
        "(crcmerkle leaves it alone and refuses to repair the replica)",
        "the read fails (logged) and so does its rewrite; peers cannot fetch it",
    ),
    "TREE_UNSUPPORTED": Level(
        WARNING,
        "a `.tree` with fields of a newer version: readable and used; crcmerkle "
        "only declines to rewrite it",
        "reads it (protobuf keeps unknown fields)",
    ),
    # -- the census (`--metadata-only`): no data read --------------------------------------
    # data_scanned stays True for both: the census compares the replicas' trees (what each
    # recorded), and a difference between them is a real one (a block one replica lacks)
    "TREE_STALE": Level(
        WARNING,
        "the `.tree` does not describe the block metadata (a block or chunk recorded "
        "after it was built, or gone without a tombstone; no container value; values "
        "that do not add up): not trusted, the census rebuilds it from the metadata",
        "never compares the two: its next data scan replaces the tree's live blocks with what "
        "it reads; a tree with no container value counts as none (hasDataChecksum)",
    ),
    "TREE_FROM_METADATA": Level(
        WARNING,
        "the census built the tree from the checksums recorded in the block metadata, "
        "reading no data: what the replica recorded, not what its disk holds (the "
        "deep scan verifies that)",
        "builds the same tree from the block metadata when a container closes without one "
        "(KeyValueHandler.updateAndGetContainerChecksumFromMetadata)",
    ),
    # -- Ozone volumes -----------------------------------------------------------------
    "CONTAINER_FILE_MISSING": Level(
        ERROR,
        "no `.container` file: the replica is not loaded, nothing is verified",
        "MISSING_CONTAINER_FILE: the replica is not loaded",
    ),
    "CONTAINER_FILE_CORRUPT": Level(
        ERROR,
        "a `.container` that does not parse, names another container or fails its "
        "checksum: the replica is not loaded",
        "CORRUPT_CONTAINER_FILE: the replica is not loaded",
    ),
    "CONTAINER_PATH_MISMATCH": Level(
        ERROR,
        "the `.container`'s metadataPath/chunksPath are not this replica's own "
        "directories: Ozone reads and writes there, not the files crcmerkle verified",
        "loads the replica and reads and writes the recorded paths (KeyValueContainerCheck "
        "verifies the chunks there): another replica's files, or a path outside the volume",
    ),
    "CONTAINER_NOT_SCANNED": Level(
        WARNING,
        "a state Ozone never data-scans (OPEN, CLOSING, RECOVERING, ...): its "
        "data is still being written or not the datanode's to verify",
        "not data-scanned (KeyValueContainer.shouldScanData): no error",
        data_scanned=False,
    ),
    "CONTAINER_NOT_SCANNED:schema": Level(
        ERROR,
        "a schema V1/V2 replica, which Ozone verifies and crcmerkle cannot read: "
        "nothing of it is verified",
        "data-scanned as any CLOSED container",
    ),
    "UNREFERENCED_DATA_FILE": Level(
        WARNING,
        "a block file no block_data row names (an uncommitted write or a "
        "half-finished delete): the committed data is intact",
        "invisible: the scanner iterates block_data rows, never the chunks directory",
    ),
    # -- Spark -------------------------------------------------------------------------
    "DUPLICATE_REPLICA": Level(
        ERROR,
        "a second replica of one container on one datanode (a copy left in another "
        "volume, a half-finished move): listed, not scanned, never compared as "
        "another datanode's",
        "loads one at start-up and, with duplicate removal on, deletes the other (the "
        "CLOSED one, else the higher BCSID, wins; EC: the first loaded, both kept): "
        "ContainerReader.resolveDuplicate",
    ),
    "SCAN_FAILED": Level(
        ERROR,
        "the replica could not be read at all (`spark scan` exits 2)",
        "(a crcmerkle Spark job's own finding)",
    ),
    # -- a cluster scan's volumes (spark_udfs.jobs.scan.VOLUME_SCHEMA: what became of each) -
    "WRONG_HOST": Level(
        ERROR,
        "a data-local task ran on another host than its volume's (Spark placed it "
        "elsewhere): it read nothing; the volume's replicas are UNVERIFIED",
        "(a crcmerkle cluster scan's own finding: Ozone's scanners run inside each datanode)",
        data_scanned=False,
    ),
    "WRONG_DATANODE": Level(
        ERROR,
        "the volume's VERSION names another datanode (datanodeUuid or clusterID) "
        "than the inventory puts on that host, or than the host's other volumes: "
        "not scanned as someone else's",
        "refuses the volume at start-up (StorageVolumeUtil.checkVolume: "
        "InconsistentStorageStateException)",
        data_scanned=False,
    ),
    "DUPLICATE_DATANODE": Level(
        ERROR,
        "volumes on two hosts claim one datanode UUID: neither host's replicas are "
        "counted as that datanode's",
        "SCM sees one datanode registering from two addresses",
        data_scanned=False,
    ),
    "NO_EXECUTOR": Level(
        ERROR,
        "an inventory host had no Spark executor when the scan started: nothing of "
        "it was read; its replicas are UNVERIFIED",
        "(a crcmerkle cluster scan's own finding)",
        data_scanned=False,
    ),
    "VOLUME_FAILED": Level(
        ERROR,
        "the volume could not be read at all (missing, a VERSION Ozone would "
        "refuse, an I/O error): none of its replicas was listed",
        "fails the volume (StorageVolumeUtil.checkVolume), its containers are not loaded",
        data_scanned=False,
    ),
    "NOT_SCANNED": Level(
        ERROR,
        "an inventory host for which the scan tables hold no volume (`crcmerkle "
        "scan --emit`: the host emitted nothing): its replicas are UNVERIFIED",
        "(a crcmerkle cluster scan's own finding)",
        data_scanned=False,
    ),
    "NOT_IN_INVENTORY": Level(
        ERROR,
        "an emitted volume the inventory does not give its host (or of a host it does "
        "not list): none of its replicas counts as a good copy or vouches for a key",
        "(a crcmerkle cluster scan's own finding: SCM knows only the datanodes registered with it)",
        data_scanned=False,
    ),
    # -- BookKeeper bookies (merkle.replica.bookkeeper): the column says what BookKeeper does
    "CORRUPT_ENTRY": Level(
        ERROR,
        "a BookKeeper entry copy whose stored digest does not match the one recomputed over"
        " its header and payload: bit rot on that bookie",
        "nothing server-side notices (no bookie check reads digests); a client reading it meets "
        "BKDigestMatchException, reads another copy and never repairs this one",
    ),
    "DIGEST_MISMATCH_ALL_COPIES": Level(
        ERROR,
        "the digest fails identically on every copy of an entry: the client computed it "
        "wrongly when writing (a client digest bug), not a disk; no copy is readable",
        "every read of the entry fails with BKDigestMatchException",
    ),
    "COPIES_DIFFER": Level(
        ERROR,
        "copies of one entry hold different bytes although each digest holds: the writer or"
        " a recovery sent different bytes, not a disk",
        "invisible: readers get whichever copy they ask first",
    ),
    "MISSING_ENTRY": Level(
        ERROR,
        "a bookie of an entry's write set (RoundRobin over its ensemble segment) holds no "
        "copy of it: under-replicated",
        "the Auditor finds it only if it checks that entry (by default the first and last of each "
        "fragment)",
    ),
    "ENTRY_FRAME_INVALID": Level(
        ERROR,
        "an index entry whose record is not the entry it names: a size field past the log's"
        " end or too small, other ledger/entry IDs at the location, an offset outside the "
        "log: the copy is gone",
        "a read fails its size/ID check (DefaultEntryLogger.validateEntry); DbLedgerStorage runs "
        "no check of its own",
    ),
    "ENTRY_LOG_MISSING": Level(
        ERROR,
        "an entry log the index points into is gone (or not a regular file): every copy it "
        "held is lost",
        "reads of those entries fail (NoEntryException); nothing checks ahead",
    ),
    "INDEX_UNREADABLE": Level(
        ERROR,
        "a bookie's entry index (DbLedgerStorage's RocksDBs or an `.idx` file) cannot be "
        "opened or decoded: the directory's entries cannot be located",
        "the bookie fails to start, or the ledger's reads fail",
    ),
    "LEDGER_IN_WRONG_DIR": Level(
        ERROR,
        "DbLedgerStorage keeps ledger L only in ledger dir L mod numDirs; its data in "
        "another directory is invisible to the bookie",
        "never reads it there: the entries count as missing",
    ),
    "COOKIE_INVALID": Level(
        ERROR,
        "a ledger directory's `current/VERSION` is no readable cookie: the directory is not read",
        "the bookie refuses to start (InvalidCookieException)",
    ),
    "COOKIE_MISMATCH": Level(
        ERROR,
        "a cookie disagrees with its bookie's other directories, does not list the "
        "directory, or names another cluster's instanceId",
        "the bookie refuses to start (Cookie.verify)",
    ),
    "BOOKIE_HOLDS_NOTHING": Level(
        ERROR,
        "a bookie holds none of the entry copies its ensemble segments give it: "
        "re-formatted or replaced (BP-31's incarnation case)",
        "the Auditor sees a live bookie and checks only sampled entries",
    ),
    "WRONG_BOOKIE": Level(
        ERROR,
        "a ledger directory's cookie names another bookie than the inventory puts on that "
        "host (a data-local scan): not scanned as someone else's; the bookie the inventory "
        "expects there is UNVERIFIED. Also copy rows of a host that name a bookie it did "
        "not list (a planted or lying emitted file): not counted",
        "the bookie refuses a directory whose cookie is another bookie's (Cookie.verify)",
        data_scanned=False,
    ),
    "DUPLICATE_BOOKIE": Level(
        ERROR,
        "ledger directories on two hosts claim one bookie ID (a data-local scan): neither "
        "host's copies are counted as that bookie's",
        "the second bookie's registration (the ephemeral znode `available/<bookieId>`) fails "
        "while the first holds it (ZKRegistrationManager): it does not start",
        data_scanned=False,
    ),
    "UNINDEXED_ENTRY": Level(
        WARNING,
        "entries in an entry log that no index names (a compaction's or deleted ledger's "
        "leftover, or a `.compacting`/`.compacted` file): the indexed copies are what "
        "counts",
        "never read; garbage collection or compaction removes them",
    ),
    "ENTRY_PAST_LAST_ENTRY": Level(
        WARNING,
        "entries stored past a CLOSED ledger's lastEntryId: never part of the ledger (an "
        "add that lost the close race, recovery leftovers)",
        "never read; removed with the ledger",
    ),
    "ENTRY_OF_OPEN_LEDGER": Level(
        WARNING,
        "entries of a ledger the metadata says is OPEN or IN_RECOVERY (lastEntryId -1): "
        "still being written, or its writer died before closing; recovery decides which "
        "become part of it",
        "readers read up to the LAC; recovery closes the ledger",
    ),
    "LEDGER_NOT_IN_METADATA": Level(
        WARNING,
        "stored entries of a ledger the metadata no longer has: deleted, garbage not yet "
        "collected (frames checked, digests cannot be)",
        "garbage collection deletes them later",
    ),
    "LEDGER_METADATA_UNREAD": Level(
        ERROR,
        "stored entries of a ledger whose metadata the store lists but could not be read "
        "(too large, unparsable, unreadable), or the store could not be listed whole: "
        "their digests and placement were not checked",
        "none: a client opening the ledger fails on the same metadata",
    ),
    "MASTER_KEY_MISMATCH": Level(
        ERROR,
        'the master key a bookie keeps for a ledger is not SHA-1("ledger" + the '
        "metadata's password): the metadata is not this data's (every HMAC digest would "
        "fail alike), or the data is another ledger's",
        "the bookie refuses adds and reads with another master key "
        "(BookieException.UnauthorizedAccessException)",
    ),
    # -- HDFS datanodes (merkle.replica.hdfs): the column says what HDFS does
    "DATA_ROT": Level(
        ERROR,
        "an HDFS chunk whose data differs from the other replicas' under their shared stored "
        "CRC: the data rotted on that volume",
        "the VolumeScanner (1 MiB/s) reports the replica at its first bad chunk; `hdfs dfs "
        "-checksum` answered by this replica still gives the intact file's value",
    ),
    "META_ROT": Level(
        ERROR,
        "an HDFS chunk whose data equals the other replicas' while its stored CRC differs: "
        "the meta file rotted, the data is good",
        "readers and the scanner see a checksum error and the NameNode deletes the replica; a"
        " file checksum answered by it differs from the file's",
    ),
    "STALE_REPLICA": Level(
        ERROR,
        "an HDFS replica with a genstamp below its block's current one (the newest on disk, "
        "or fsck's): it missed an append or a recovery; it may pass its own CRCs and is still"
        " wrong",
        "the NameNode marks it corrupt (genstamp mismatch) and invalidates it",
    ),
    "REPLICAS_DIFFER": Level(
        ERROR,
        "finalized HDFS replicas of one genstamp that each verify yet hold different bytes "
        "(their stored CRCs differ) or lengths: a writer or recovery bug, not a disk",
        "the DirectoryScanner marks a length mismatch corrupt; equal lengths go unnoticed",
    ),
    "REPLICA_MISSING": Level(
        ERROR,
        "fsck places a replica on a scanned HDFS volume that holds none",
        "the NameNode learns it from the next block report (the DirectoryScanner reconciles "
        "every 6 h)",
    ),
    "UNDER_REPLICATED": Level(
        ERROR,
        "an HDFS block with fewer verified replicas of its genstamp than its replication, "
        "every location fsck names scanned",
        "fsck counts live replicas whatever their data",
    ),
    "META_WITHOUT_BLOCK": Level(
        ERROR,
        "an HDFS meta file without its block file",
        "the DirectoryScanner counts a missing block file and drops the replica",
    ),
    "BLOCK_WITHOUT_META": Level(
        ERROR,
        "an HDFS block file without its meta file: nothing to verify it by",
        'loaded with genstamp 0 ("does not have a metafile!")',
    ),
    "DUPLICATE_META": Level(
        ERROR,
        "two or more meta files for one HDFS block in one directory",
        'FsDatasetUtil.findMetaFile refuses the replica ("Found more than one meta files")',
    ),
    "META_HEADER_INVALID": Level(
        ERROR,
        "an HDFS meta header that cannot be read: shorter than 7 bytes, an unknown checksum "
        "type, or a bytesPerChecksum out of range",
        "CorruptMetaHeaderException: the replica is reported corrupt",
    ),
    "META_LENGTH_MISMATCH": Level(
        ERROR,
        "a finalized HDFS replica's meta holds another number of CRCs than its block's chunks",
        "readers fail where a CRC is missing",
    ),
    "READ_ERROR": Level(
        ERROR,
        "an I/O error reading an HDFS replica (or it shrank while read): not corruption, and "
        "not verified",
        "the VolumeScanner reports any I/O error as a bad block, as if the data were corrupt",
    ),
    "VOLUME_UNREADABLE": Level(
        ERROR,
        "an HDFS storage directory or block pool that cannot be read (its VERSION, its "
        "current/ directory): none of its replicas is listed",
        "the datanode fails the volume",
    ),
    "BLOCK_POOL_UNREADABLE": Level(
        ERROR,
        "an HDFS block pool directory whose current/ or finalized/ cannot be opened",
        "the datanode fails the block pool on that volume",
    ),
    "BLOCK_UNVERIFIED": Level(
        WARNING,
        "an HDFS block with fewer verified replicas than its replication while some locations"
        " fsck names were not scanned",
        "(crcmerkle's own: scan those hosts too)",
    ),
    "REPLICA_OPEN": Level(
        WARNING,
        "an open HDFS file's replica (rbw/): verified up to its last complete chunk, never "
        "called corrupt",
        "never scanned; fsck lists open files only with -openforwrite",
    ),
    "REPLICA_NOT_IN_FSCK": Level(
        WARNING,
        "an HDFS replica of a block no file of the fsck output owns (deleted, not yet "
        "invalidated, or outside the fsck PATH)",
        "a replica the NameNode does not know is deleted after the next block report",
    ),
    "BLOCK_MISPLACED": Level(
        WARNING,
        "a finalized HDFS block outside the subdir its ID gives (DatanodeUtil.idToBlockDir)",
        "the VolumeScanner logs and skips it",
    ),
    "META_VERSION": Level(
        WARNING,
        "an HDFS meta header version other than 1",
        "readers warn and go on",
    ),
    "CHECKSUM_NULL": Level(
        WARNING,
        "an HDFS replica written with checksum type NULL: no stored CRC to check",
        "read unchecked",
    ),
    "UNEXPECTED_ENTRY": Level(
        WARNING,
        "an entry of an HDFS finalized/ tree that is no subdir, block or meta file (or an ID "
        "past 64 bits): not read",
        "ignored by the datanode's walk",
    ),
}


def severity_of(kind: str, case: str = "") -> str:
    """The severity of a finding of `kind` (in `case`, see the module docstring); a kind
    the table does not know is an error."""
    level = LEVELS.get(f"{kind}:{case}") if case else None
    if level is None:
        level = LEVELS.get(kind)
    return ERROR if level is None else level.severity


def counts_as_failure(severity: str, strict: bool = False) -> bool:
    """Does a finding of this severity make a replica not ok (exit 1)? Errors always;
    warnings only with --strict. An unknown severity counts (never waved through)."""
    return strict or severity != WARNING


def warning_kinds() -> FrozenSet[str]:
    """The kinds that are warnings in their usual case."""
    return frozenset(k for k, v in LEVELS.items() if ":" not in k and v.severity == WARNING)


#: warning kinds after which the replica's data was not read (left out of comparisons)
NOT_SCANNED_KINDS: FrozenSet[str] = frozenset(
    k for k, v in LEVELS.items() if ":" not in k and not v.data_scanned
)
