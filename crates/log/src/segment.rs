//! Segment files: `<first LSN, 20 digits>.seg`, each reading as zeros past
//! its records (made so by [`crate::spare`]), so that recovery can tell
//! where records end: the names, reading a segment, and the rules of its
//! scan.

use std::io;
use std::path::Path;

use ringkit::buf::AlignedBuf;
use ringkit::fs::{File, OpenOptions};

use crate::frame::{BatchHeader, BATCH_HEADER, BATCH_MAGIC, MAX_ALIGN, MIN_ALIGN, SEGMENT_HEADER};
use crate::record::{self, Found};

/// The block the file system asks `O_DIRECT` writes on `f` to keep to
/// (`statx` `STATX_DIOALIGN`: offset and memory alignment), at least
/// [`MIN_ALIGN`], kept in the header of a segment made now; a direct log
/// refuses one above [`MIN_ALIGN`] (`open::check_block`). A kernel that
/// does not tell gets [`MIN_ALIGN`].
pub(crate) async fn block_of(f: &File) -> io::Result<u32> {
    let need = f
        .dio_alignment()
        .await?
        .map_or(0, |a| a.offset.max(a.memory));
    if need > MAX_ALIGN {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("the file system asks O_DIRECT for {need}-byte blocks; ringkit-log pads to at most {MAX_ALIGN}"),
        ));
    }
    Ok(need.max(MIN_ALIGN).next_power_of_two())
}

/// Name of the segment whose first record is `first`.
pub fn name(first: u64) -> String {
    format!("{first:020}.seg")
}

/// The first LSN of a segment file name, if it is one.
pub fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Open flags of a segment: writes may be `O_DIRECT`.
pub async fn open_write(path: &Path, direct: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .direct(direct)
        .open(path)
        .await
}

/// Reads a file in aligned 1 MiB chunks (so it works with `O_DIRECT`),
/// keeping what lies from the block of the last offset asked for on.
pub struct Reader<'a> {
    f: &'a File,
    /// The file's size.
    pub size: u64,
    base: u64,
    buf: Vec<u8>,
    chunk: Option<AlignedBuf>,
    overlay: Option<Overlay>,
}

/// Bytes a reader shows in place of the file's: what a pending truncation
/// (`edit.rs`) leaves once finished, so a read-only recovery reads the log
/// as the read-write one will make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlay {
    /// Zeros over `zero.0..zero.1`.
    pub zero: (u64, u64),
    /// Then these 32 bytes at this offset (a rewritten batch header).
    pub patch: Option<(u64, [u8; crate::frame::BATCH_HEADER])>,
}

impl Overlay {
    /// Apply to `buf`, which holds the file's bytes from `base`.
    fn apply(&self, base: u64, buf: &mut [u8]) {
        let end = base + buf.len() as u64;
        let (z0, z1) = (self.zero.0.max(base), self.zero.1.min(end));
        if z0 < z1 {
            buf[(z0 - base) as usize..(z1 - base) as usize].fill(0);
        }
        if let Some((at, bytes)) = &self.patch {
            for (i, &b) in bytes.iter().enumerate() {
                let off = at + i as u64;
                if (base..end).contains(&off) {
                    buf[(off - base) as usize] = b;
                }
            }
        }
    }
}

const CHUNK: usize = 1 << 20;

impl<'a> Reader<'a> {
    /// A reader of `f`, `size` bytes long.
    pub fn new(f: &'a File, size: u64) -> Reader<'a> {
        Reader {
            f,
            size,
            base: 0,
            buf: Vec::new(),
            chunk: None,
            overlay: None,
        }
    }

    /// This reader, showing `overlay` over the file's bytes.
    pub fn with_overlay(mut self, overlay: Option<Overlay>) -> Reader<'a> {
        self.overlay = overlay;
        self
    }

    /// The bytes `off..off + len`, fewer at the end of the file.
    pub async fn get(&mut self, off: u64, len: usize) -> io::Result<&[u8]> {
        let block = off - off % 4096;
        if block < self.base || block > self.base + self.buf.len() as u64 {
            self.base = block;
            self.buf.clear();
        } else {
            self.buf.drain(..(block - self.base) as usize);
            self.base = block;
        }
        let want = (off + len as u64).min(self.size);
        while self.base + (self.buf.len() as u64) < want {
            // A chunk no larger than the file (segments may be small).
            let size = (self.size.div_ceil(4096) * 4096).clamp(4096, CHUNK as u64) as usize;
            let mut c = self
                .chunk
                .take()
                .unwrap_or_else(|| AlignedBuf::new(size, 4096));
            c.set_len(0);
            let at = self.base + self.buf.len() as u64;
            let (r, c) = self.f.read_at(c, at).await;
            let n = r?;
            let had = self.buf.len();
            self.buf.extend_from_slice(&c.as_slice()[..n]);
            if let Some(o) = &self.overlay {
                o.apply(at, &mut self.buf[had..]);
            }
            self.chunk = Some(c);
            if n == 0 {
                break;
            }
        }
        let from = ((off - self.base) as usize).min(self.buf.len());
        let to = ((want.max(off) - self.base) as usize).min(self.buf.len());
        Ok(&self.buf[from..to])
    }

    /// The offset of the last non-zero byte in `from..to`, if any.
    pub async fn last_nonzero(&mut self, from: u64, to: u64) -> io::Result<Option<u64>> {
        let mut found = None;
        let mut off = from;
        while off < to.min(self.size) {
            let n = (to - off).min(CHUNK as u64) as usize;
            let got = self.get(off, n).await?;
            if got.is_empty() {
                break;
            }
            if let Some(i) = last_nonzero(got) {
                found = Some(off + i as u64);
            }
            off += got.len() as u64;
        }
        Ok(found)
    }
}

/// The index of the last non-zero byte of `b`.
fn last_nonzero(b: &[u8]) -> Option<usize> {
    // Words first: this runs over whole segments.
    let (head, words, tail) = {
        // SAFETY: any bit pattern is a valid u64; align_to splits the
        // slice at aligned word boundaries without changing its bytes.
        unsafe { b.align_to::<u64>() }
    };
    if let Some(i) = tail.iter().rposition(|&x| x != 0) {
        return Some(head.len() + words.len() * 8 + i);
    }
    if let Some(w) = words.iter().rposition(|&x| x != 0) {
        let base = head.len() + w * 8;
        let i = b[base..base + 8]
            .iter()
            .rposition(|&x| x != 0)
            .expect("a non-zero byte");
        return Some(base + i);
    }
    head.iter().rposition(|&x| x != 0)
}

/// A whole, checked batch of log `log_id` at `pos` whose first LSN is
/// `want` (any LSN if `None`): its header and each record's offset.
pub async fn batch_at(
    r: &mut Reader<'_>,
    pos: u64,
    log_id: u64,
    want: Option<u64>,
    max_len: u64,
) -> io::Result<Option<(BatchHeader, Vec<u32>)>> {
    let Some(h) = BatchHeader::decode(r.get(pos, BATCH_HEADER).await?, log_id) else {
        return Ok(None);
    };
    if want.is_some_and(|w| w != h.first) || u64::from(h.len) > max_len || pos + h.extent() > r.size
    {
        return Ok(None);
    }
    if h.hole {
        // LSNs lost to damage, left by salvage: no records, each LSN at
        // the hole's own offset (where the record before it ends).
        let ok = h.len == 0 && h.count > 0;
        return Ok(ok.then(|| (h, vec![pos as u32; h.count as usize])));
    }
    let body_at = pos + BATCH_HEADER as u64;
    let body = r.get(body_at, h.len as usize).await?;
    if body.len() != h.len as usize {
        return Ok(None);
    }
    let mut offsets = Vec::with_capacity(h.count as usize);
    let mut at = 0usize;
    for i in 0..u64::from(h.count) {
        match record::decode(&body[at..], h.first + i) {
            Found::Record(_, total) => {
                offsets.push((body_at + at as u64) as u32);
                at += total;
            }
            _ => return Ok(None),
        }
    }
    Ok((at == body.len()).then_some((h, offsets)))
}

/// How the records of a segment end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// Zeros from the end of the records to the end of the file.
    Clean,
    /// Bytes that are not whole batches lie from the end of the records up
    /// to `last` (inclusive), all within the window that may have been
    /// unsynced at a crash: a torn write, never acknowledged.
    Torn { last: u64 },
    /// Damage where acknowledged records were: `why` says what was found.
    Corrupt { why: String },
}

/// What a scan of one segment found.
#[derive(Debug)]
pub struct Scan {
    /// Offset of each record, in LSN order from the segment's first.
    pub offsets: Vec<u32>,
    /// Holes salvage left: (first LSN, count).
    pub holes: Vec<(u64, u64)>,
    /// Where the records end (where the next batch goes).
    pub end: u64,
    /// What lies after them.
    pub tail: Tail,
}

/// What a segment's header says a crash may leave unsynced in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flight {
    /// The most bytes unsynced at once, from the start of the oldest
    /// unsynced batch.
    pub window: u64,
    /// The most batches in flight (written, not yet synced) at once.
    pub depth: u32,
}

impl Flight {
    /// What the header `h` says.
    pub fn of(h: &crate::frame::SegmentHeader) -> Flight {
        Flight {
            window: u64::from(h.window),
            depth: h.depth,
        }
    }
}

/// Read the batches of one segment of log `log_id` whose header says it
/// starts at `first`, and tell how its records end. `flight` is what may
/// have been unsynced at once (from the segment header); `last` says
/// whether it is the log's last segment (only the last can have an
/// unsynced tail: every earlier one was synced whole before the next was
/// started).
///
/// The rules: the records end at the first place that is not a whole
/// batch of the next LSN. If everything from there to the end of the file
/// is zero, the segment ends cleanly. Otherwise what lies there is a torn
/// tail only if it could be the batches in flight at a crash: the segment
/// is the last one, nothing past the window is non-zero, and after the
/// torn batch lie at most `depth - 1` whole batches of this log, one after
/// another, and nothing else. Anything else is corruption of records that
/// were acknowledged.
pub async fn scan(
    r: &mut Reader<'_>,
    log_id: u64,
    first: u64,
    flight: Flight,
    last: bool,
) -> io::Result<Scan> {
    let window = flight.window;
    let mut pos = SEGMENT_HEADER;
    let mut want = first;
    let mut offsets = Vec::new();
    let mut holes = Vec::new();
    while pos + BATCH_HEADER as u64 <= r.size {
        match batch_at(r, pos, log_id, Some(want), window).await? {
            Some((h, offs)) => {
                if h.hole {
                    holes.push((h.first, u64::from(h.count)));
                }
                offsets.extend(offs);
                want += u64::from(h.count);
                pos += h.extent();
            }
            None => break,
        }
    }
    let end = pos;
    let tail = match r.last_nonzero(end, r.size).await? {
        None => Tail::Clean,
        Some(lastnz) => classify(r, log_id, end, lastnz, flight, last, want).await?,
    };
    Ok(Scan {
        offsets,
        holes,
        end,
        tail,
    })
}

async fn classify(
    r: &mut Reader<'_>,
    log_id: u64,
    end: u64,
    lastnz: u64,
    flight: Flight,
    last: bool,
    want: u64,
) -> io::Result<Tail> {
    let window = flight.window;
    let at = format!("at offset {end} (where record {want} should start)");
    if !last {
        return Ok(Tail::Corrupt {
            why: format!("bytes that are not a whole batch {at} in a segment that is not the last"),
        });
    }
    if lastnz >= end + window {
        return Ok(Tail::Corrupt {
            why: format!(
                "bytes that are not a whole batch {at}, and data at offset {lastnz}, past the \
                 {window} bytes a crash can leave unsynced"
            ),
        });
    }
    // What a crash can leave where the last batch starts: each 512-byte
    // sector of it either written or not, and one not written still holds
    // zeros (segments are zero-filled and no write covers bytes before the
    // end of the records). So a batch header that is non-zero in every
    // sector it spans is whole, or damaged; and a whole header whose
    // records do not check, with every sector of them written, is damage.
    let head = r.get(end, BATCH_HEADER).await?.to_vec();
    // The torn batch's extent and LSN count, when its header is whole: a
    // later batch in flight starts right after it, at the LSN after it.
    let mut torn_batch = None;
    if head.iter().any(|&b| b != 0) {
        match BatchHeader::decode(&head, log_id) {
            Some(h)
                if h.first == want && end + h.extent() <= r.size && u64::from(h.len) <= window =>
            {
                torn_batch = Some((h.extent(), u64::from(h.count)));
                let body = r.get(end, BATCH_HEADER + h.len as usize).await?.to_vec();
                if !has_zero_sector(end, &body) {
                    return Ok(Tail::Corrupt {
                        why: format!(
                            "a batch {at} whose records do not check though every sector of it \
                             was written: damage, not a torn write"
                        ),
                    });
                }
            }
            _ => {
                // A header in one sector (as the log writes them) is whole
                // or zero after a crash; one that straddles two may have
                // one part written.
                let one_sector = end / 512 == (end + BATCH_HEADER as u64 - 1) / 512;
                if one_sector || !has_zero_sector(end, &head) {
                    return Ok(Tail::Corrupt {
                        why: format!(
                            "bytes {at} that are neither zeros nor a whole batch header: damage, \
                             not a torn write"
                        ),
                    });
                }
            }
        }
    }
    // A whole batch of this log after the damage: with one batch in
    // flight, the damage is not a torn write; with more, it may be the
    // oldest of them, torn, followed by the later ones (see `in_flight`).
    let stop = (end + window).min(r.size);
    let mut from = end + 1;
    while from + BATCH_HEADER as u64 <= stop {
        let n = (stop - from).min(CHUNK as u64) as usize;
        let hay = r.get(from, n).await?.to_vec();
        let mut found = None;
        for i in memchr::memmem::find_iter(&hay, BATCH_MAGIC) {
            if from + i as u64 >= end + 5 {
                let p = from + i as u64 - 4;
                if let Some((h, _)) = batch_at(r, p, log_id, None, window).await? {
                    found = Some((p, h));
                    break;
                }
            }
        }
        if let Some((p, h)) = found {
            let why = match in_flight(r, log_id, (end, torn_batch), (p, h), flight, lastnz, want)
                .await?
            {
                Ok(()) => return Ok(Tail::Torn { last: lastnz }),
                Err(why) => why,
            };
            return Ok(Tail::Corrupt {
                why: format!(
                    "bytes that are not a whole batch {at}, followed by a whole batch of records \
                     {}..{} at offset {p}: {why}",
                    h.first,
                    h.first + u64::from(h.count)
                ),
            });
        }
        if hay.len() < 4 {
            break;
        }
        from += (hay.len() - 3) as u64;
    }
    Ok(Tail::Torn { last: lastnz })
}

/// Whether the damage at `end` (a batch of `torn_batch` = (bytes, LSNs) if
/// its header is whole) followed by the whole batch `h` at `p` can be what
/// a crash leaves with `flight.depth` batches in flight: the oldest torn,
/// each later one written whole by its own write. The whole ones must
/// follow the torn one directly (where its header says it ends, at the LSN
/// after its own, if it is whole), hold later LSNs, run on one after
/// another, be at most
/// `depth - 1`, and be the last non-zero bytes of the segment. `Err` says
/// which rule fails.
async fn in_flight(
    r: &mut Reader<'_>,
    log_id: u64,
    (end, torn_batch): (u64, Option<(u64, u64)>),
    (p, h): (u64, BatchHeader),
    flight: Flight,
    lastnz: u64,
    want: u64,
) -> io::Result<Result<(), String>> {
    if flight.depth < 2 {
        return Ok(Err(
            "this segment was written with one batch in flight, so only the last can be torn"
                .to_string(),
        ));
    }
    if let Some((extent, count)) = torn_batch {
        if end + extent != p {
            return Ok(Err(format!(
                "it does not start where the torn batch's header says that batch ends ({})",
                end + extent
            )));
        }
        if h.first != want + count {
            return Ok(Err(format!(
                "it does not start at LSN {}, after the torn batch's",
                want + count
            )));
        }
    }
    if h.first <= want {
        return Ok(Err(format!(
            "it does not hold LSNs after {want}, where the torn batch starts"
        )));
    }
    let (mut next, mut lsn, mut whole) = (p + h.extent(), h.first + u64::from(h.count), 1u32);
    while lastnz >= next {
        match batch_at(r, next, log_id, Some(lsn), flight.window).await? {
            Some((h, _)) if whole + 1 < flight.depth => {
                next += h.extent();
                lsn += u64::from(h.count);
                whole += 1;
            }
            Some(_) => {
                return Ok(Err(format!(
                    "more whole batches follow than the {} a crash can leave in flight",
                    flight.depth
                )))
            }
            None => {
                return Ok(Err(format!(
                    "data at offset {lastnz} lies past the batches that were in flight"
                )))
            }
        }
    }
    if next - end > flight.window {
        return Ok(Err(format!(
            "they span more than the {} bytes a crash can leave unsynced",
            flight.window
        )));
    }
    Ok(Ok(()))
}

/// Whether some 512-byte sector's part of `bytes` (which start at file
/// offset `at`) is all zeros: a sector a torn write may not have written.
fn has_zero_sector(at: u64, bytes: &[u8]) -> bool {
    let mut i = 0usize;
    while i < bytes.len() {
        let off = at + i as u64;
        let n = ((512 - off % 512) as usize).min(bytes.len() - i);
        if bytes[i..i + n].iter().all(|&b| b == 0) {
            return true;
        }
        i += n;
    }
    false
}

/// Zero `from..=last` of `f` and sync: nothing past the recovered end may
/// later pass for a record.
pub async fn zero_range(f: &File, from: u64, last: u64) -> io::Result<()> {
    let mut off = from;
    while off <= last {
        let n = (last + 1 - off).min(CHUNK as u64) as usize;
        f.write_all_at(vec![0u8; n], off).await.0?;
        off += n as u64;
    }
    f.sync_data().await
}
