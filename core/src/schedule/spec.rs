//! A schedule's rule, parsed: when it fires (ADR 24).
//!
//! Cron expressions are parsed and matched against wall-clock times by
//! `croner` (5 fields, or 6 with leading seconds; names, `@hourly…@yearly`
//! macros, `L`, `W`, `#`; Vixie's day-of-month OR day-of-week, or Honker's
//! AND). Time zones and their transitions come from `jiff` with the IANA
//! database compiled in. The DST policy is ours (Vixie cron's rule):
//!
//! - a **fixed-time** schedule (no wildcard and no step in the minute and
//!   hour fields) fires once at each matching wall time; a wall time that a
//!   spring-forward skips fires once, at the first instant after the jump
//!   (several skipped ones collapse into that one fire); a wall time that a
//!   fall-back repeats fires once, at its first occurrence;
//! - any other schedule fires at every **instant** whose wall time matches:
//!   nothing in a skipped hour, both occurrences in a repeated one (`*/15`
//!   fires 8 times across a fall-back's hour pair).
//!
//! `@every 90s` is elapsed time (DST-blind), aligned to an anchor: the
//! schedule's start, or the Unix epoch.

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};
use jiff::Timestamp;

use crate::error::{Error, Result};

/// The shortest `@every` interval.
pub const MIN_EVERY_MS: i64 = 1_000;
/// The longest `@every` interval (366 days).
pub const MAX_EVERY_MS: i64 = 366 * 86_400_000;
/// The longest cron expression or zone name accepted (bytes).
pub const MAX_SPEC_BYTES: usize = 256;

/// Which days a cron expression with both day fields restricted means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DayRule {
    /// Vixie cron's: a day matches when either field matches (`0 9 13 * 5`:
    /// every 13th and every Friday). The default.
    #[default]
    Or,
    /// Honker's: both must match (`0 9 13 * 5`: Friday the 13th only).
    And,
}

impl DayRule {
    /// The stored word (`or`, `and`).
    pub fn as_str(self) -> &'static str {
        match self {
            DayRule::Or => "or",
            DayRule::And => "and",
        }
    }

    /// Parses the stored word.
    pub fn parse(s: &str) -> Result<DayRule> {
        match s {
            "or" => Ok(DayRule::Or),
            "and" => Ok(DayRule::And),
            other => Err(Error::invalid(format!(
                "day_rule must be \"or\" or \"and\", got {other:?}"
            ))),
        }
    }
}

#[derive(Clone, Debug)]
enum Rule {
    Cron { cron: Box<Cron>, fixed: bool },
    Every { every_ms: i64 },
}

/// A parsed schedule rule in its time zone.
#[derive(Clone, Debug)]
pub struct Spec {
    rule: Rule,
    zone: TimeZone,
    zone_name: String,
}

/// What each field takes, told in honker's words (a refusal ended in the
/// cron parser's own text: issue 53).
const FIELD_RULES: [&str; 6] = [
    "0-59",
    "0-59",
    "0-23",
    "1-31, L (the last day) or nW (the weekday nearest n)",
    "1-12 or JAN-DEC",
    "0-7 (0 and 7 are Sunday) or SUN-SAT, nL (the last one in the month) or n#k (the k-th)",
];

const FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day of month",
    "month",
    "day of week",
];

fn parser(day_rule: DayRule) -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .dom_and_dow(day_rule == DayRule::And)
        // `5/10`: from 5 every 10 (Quartz's and most crons' reading).
        .sloppy_ranges(true)
        .build()
}

/// The IANA zone named `name` (case-insensitive), with its canonical name.
pub fn zone(name: &str) -> Result<(TimeZone, String)> {
    if name.is_empty() || name.len() > MAX_SPEC_BYTES || name.contains('\0') {
        return Err(Error::invalid(format!(
            "time_zone must be an IANA zone name such as \"Europe/Berlin\", got {name:?}"
        )));
    }
    let tz = TimeZone::get(name).map_err(|_| {
        Error::invalid(format!(
            "unknown time zone {name:?} (an IANA name such as \"America/New_York\" or \"UTC\")"
        ))
    })?;
    let canonical = tz.iana_name().unwrap_or(name).to_string();
    Ok((tz, canonical))
}

/// The IANA name of this process's local time zone (`TZ`, then
/// `/etc/localtime`), or `UTC` when it has none: what Honker's SQL
/// functions evaluate in, stored on the schedule.
pub fn local_zone_name() -> String {
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.trim_start_matches(':');
        if let Ok((_, name)) = zone(tz) {
            return name;
        }
    }
    if let Ok(target) = std::fs::read_link("/etc/localtime") {
        let s = target.to_string_lossy();
        if let Some(i) = s.find("zoneinfo/") {
            if let Ok((_, name)) = zone(&s[i + "zoneinfo/".len()..]) {
                return name;
            }
        }
    }
    if let Ok(s) = std::fs::read_to_string("/etc/timezone") {
        if let Ok((_, name)) = zone(s.trim()) {
            return name;
        }
    }
    "UTC".into()
}

impl Spec {
    /// Parses `expr` (cron, a macro, or `@every <duration>`) in the zone
    /// named `zone_name`. Errors are `INVALID_ARGUMENT` and name the field.
    pub fn parse(expr: &str, zone_name: &str, day_rule: DayRule) -> Result<Spec> {
        let (zone, zone_name) = zone(zone_name)?;
        if expr.len() > MAX_SPEC_BYTES || expr.contains('\0') {
            return Err(Error::invalid(format!(
                "a schedule is at most {MAX_SPEC_BYTES} bytes of text"
            )));
        }
        let trimmed = expr.trim();
        let lower = trimmed.to_ascii_lowercase();
        let rule = if let Some(rest) = lower.strip_prefix("@every") {
            Rule::Every {
                every_ms: every(rest.trim(), expr)?,
            }
        } else {
            let text = if lower == "@midnight" {
                "@daily"
            } else {
                trimmed
            };
            let cron = parse_cron(text, expr, day_rule)?;
            let fixed = is_fixed(&cron);
            Rule::Cron {
                cron: Box::new(cron),
                fixed,
            }
        };
        let spec = Spec {
            rule,
            zone,
            zone_name,
        };
        Ok(spec)
    }

    /// The zone's canonical IANA name.
    pub fn zone_name(&self) -> &str {
        &self.zone_name
    }

    /// Whether the rule is `@every`.
    pub fn is_every(&self) -> bool {
        matches!(self.rule, Rule::Every { .. })
    }

    /// Whether the rule is a fixed-time cron (see the module docs).
    pub fn is_fixed_time(&self) -> bool {
        matches!(self.rule, Rule::Cron { fixed: true, .. })
    }

    /// The first fire strictly after `after_ms`; `anchor_ms` aligns
    /// `@every`. `None` when the rule never fires again (a cron that
    /// matches no date before the year 5000).
    pub fn next_after(&self, after_ms: i64, anchor_ms: i64) -> Result<Option<i64>> {
        match &self.rule {
            Rule::Every { every_ms } => {
                let k = (after_ms - anchor_ms).div_euclid(*every_ms) + 1;
                Ok(anchor_ms.checked_add(k.saturating_mul(*every_ms)))
            }
            Rule::Cron { cron, fixed } => {
                let after_s = after_ms.div_euclid(1000);
                Ok(cron_next(cron, *fixed, &self.zone, after_s)?.map(|s| s * 1000))
            }
        }
    }

    /// How many fires lie in `(after_ms, until_ms]`, counting at most
    /// `cap` (then `cap`); with the last one counted.
    pub fn count_between(
        &self,
        after_ms: i64,
        until_ms: i64,
        anchor_ms: i64,
        cap: u64,
    ) -> Result<(u64, Option<i64>)> {
        if let Rule::Every { every_ms } = &self.rule {
            if until_ms <= after_ms {
                return Ok((0, None));
            }
            let first = (after_ms - anchor_ms).div_euclid(*every_ms) + 1;
            let last = (until_ms - anchor_ms).div_euclid(*every_ms);
            let n = (last - first + 1).max(0) as u64;
            let last_at = (n > 0).then(|| anchor_ms + last * every_ms);
            return Ok((n.min(cap), last_at));
        }
        let (mut n, mut t, mut last) = (0u64, after_ms, None);
        while n < cap {
            match self.next_after(t, anchor_ms)? {
                Some(f) if f <= until_ms => {
                    n += 1;
                    t = f;
                    last = Some(f);
                }
                _ => break,
            }
        }
        Ok((n, last))
    }
}

/// Parses an `@every` duration: one or more `<n><unit>` parts, units `ms`,
/// `s`, `m`, `h`, `d` (`90s`, `1h30m`).
fn every(rest: &str, expr: &str) -> Result<i64> {
    let bad = |why: &str| {
        Error::invalid(format!(
            "invalid @every in {expr:?}: {why} (e.g. \"@every 90s\", \"@every 1h30m\")"
        ))
    };
    if rest.is_empty() {
        return Err(bad("a duration is missing"));
    }
    let (mut total, mut num) = (0i64, String::new());
    let mut chars = rest.chars().peekable();
    let mut parts = 0;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit_ms: i64 = match c {
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1
            }
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => return Err(bad(&format!("unexpected {c:?}"))),
        };
        if num.is_empty() {
            return Err(bad("a unit without a number"));
        }
        let n: i64 = num.parse().map_err(|_| bad("a number out of range"))?;
        total = n
            .checked_mul(unit_ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| bad("too long"))?;
        num.clear();
        parts += 1;
    }
    if !num.is_empty() || parts == 0 {
        return Err(bad("a number without a unit"));
    }
    if !(MIN_EVERY_MS..=MAX_EVERY_MS).contains(&total) {
        return Err(bad(&format!(
            "the interval must be between 1s and 366d, got {total} ms"
        )));
    }
    Ok(total)
}

fn parse_cron(text: &str, expr: &str, day_rule: DayRule) -> Result<Cron> {
    let p = parser(day_rule);
    match p.parse(text) {
        Ok(cron) => {
            // A rule that never matches (`0 0 30 2 *`) is refused here
            // rather than at its first tick.
            let probe = DateTime::constant(2000, 1, 1, 0, 0, 0, 0);
            if cron.find_next_occurrence(&probe, false).is_err() {
                return Err(Error::invalid(format!(
                    "cron {expr:?} matches no date (a day that never exists?)"
                )));
            }
            Ok(cron)
        }
        Err(e) => Err(Error::invalid(describe_error(text, expr, &p, &e))),
    }
}

/// Names the field (and its position in the text) that makes `text`
/// invalid: each field is tried alone, the others left as `*`.
fn describe_error(text: &str, expr: &str, p: &CronParser, e: &croner::errors::CronError) -> String {
    let fields: Vec<(usize, &str)> = text
        .split_whitespace()
        .map(|f| (f.as_ptr() as usize - text.as_ptr() as usize, f))
        .collect();
    if text.starts_with('@') {
        return format!(
            "invalid cron {expr:?}: unknown macro (use @yearly, @annually, @monthly, @weekly, \
             @daily, @midnight, @hourly or @every <duration>)"
        );
    }
    if !(5..=6).contains(&fields.len()) {
        return format!(
            "invalid cron {expr:?}: {} fields; a cron has 5 (minute hour day-of-month month \
             day-of-week) or 6 (seconds first)",
            fields.len()
        );
    }
    let offset = 6 - fields.len();
    for (i, (pos, f)) in fields.iter().enumerate() {
        let mut parts = ["*"; 6];
        parts[0] = "0";
        parts[i + offset] = f;
        if p.parse(&parts.join(" ")).is_err() {
            return format!(
                "invalid cron {expr:?}: field {} ({}) {f:?} at position {} is not valid; it \
                 takes * or values {}, as a list (a,b), a range (a-b) or a step (*/n, a-b/n)",
                i + 1,
                FIELDS[i + offset],
                pos + 1,
                FIELD_RULES[i + offset]
            );
        }
    }
    format!("invalid cron {expr:?}: its fields are valid alone but not together ({e})")
}

fn is_fixed(cron: &Cron) -> bool {
    let p = &cron.pattern;
    !p.minutes.from_wildcard && p.minutes.step == 1 && !p.hours.from_wildcard && p.hours.step == 1
}

fn to_ts(s: i64) -> Result<Timestamp> {
    Timestamp::from_second(s).map_err(|_| Error::invalid(format!("time {s} s is out of range")))
}

fn instant(wall: DateTime, offset: Offset) -> Result<i64> {
    offset
        .to_timestamp(wall)
        .map(|t| t.as_second())
        .map_err(|_| Error::invalid("a fire time is out of range"))
}

/// The first fire (seconds) strictly after `after` (seconds).
fn cron_next(cron: &Cron, fixed: bool, tz: &TimeZone, after: i64) -> Result<Option<i64>> {
    let ts = to_ts(after)?;
    let off = tz.to_offset(ts);
    let wall = off.to_datetime(ts);
    let Some(mut best) = linear(cron, fixed, tz, wall, after)? else {
        return Ok(None);
    };
    if !fixed {
        // Fires in the later half of a repeated hour that starts after
        // `after` and whose wall times the walk above already passed.
        if let Some(tr) = tz.following(ts).next() {
            let (before, later) = (off, tr.offset());
            if later < before {
                let start = later.to_datetime(tr.timestamp());
                let end = before.to_datetime(tr.timestamp());
                if let Ok(w) = cron.find_next_occurrence(&start, true) {
                    if w < end {
                        let i = instant(w, later)?;
                        if i > after && i < best {
                            best = i;
                        }
                    }
                }
            }
        }
    }
    Ok(Some(best))
}

/// Walks matching wall times forward from `wall` (the wall time at
/// `after`), mapping each to the instants it fires at.
fn linear(
    cron: &Cron,
    fixed: bool,
    tz: &TimeZone,
    mut wall: DateTime,
    after: i64,
) -> Result<Option<i64>> {
    for _ in 0..10_000 {
        let Ok(m) = cron.find_next_occurrence(&wall, false) else {
            return Ok(None);
        };
        match tz.to_ambiguous_timestamp(m).offset() {
            AmbiguousOffset::Unambiguous { offset } => {
                let i = instant(m, offset)?;
                if i > after {
                    return Ok(Some(i));
                }
                wall = m;
            }
            AmbiguousOffset::Gap {
                before,
                after: later,
            } => {
                // The jump: the first instant past the gap.
                let jump = tz
                    .preceding(to_ts(instant(m, before)? + 1)?)
                    .next()
                    .map(|t| t.timestamp().as_second())
                    .ok_or_else(|| Error::internal("a gap without a transition"))?;
                if fixed && jump > after {
                    return Ok(Some(jump));
                }
                // Nothing else in this gap fires: go on from its end.
                let end = later.to_datetime(to_ts(jump)?);
                wall = end
                    .checked_sub(jiff::Span::new().seconds(1))
                    .map_err(|_| Error::internal("time out of range"))?
                    .max(m);
            }
            AmbiguousOffset::Fold {
                before,
                after: later,
            } => {
                let first = instant(m, before)?;
                if first > after {
                    return Ok(Some(first));
                }
                if !fixed {
                    let second = instant(m, later)?;
                    if second > after {
                        return Ok(Some(second));
                    }
                }
                wall = m;
            }
        }
    }
    Err(Error::internal("no fire found in 10,000 steps"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }

    fn fires(expr: &str, tz: &str, rule: DayRule, from: &str, to: &str) -> Vec<String> {
        let spec = Spec::parse(expr, tz, rule).unwrap();
        let (mut t, end) = (ms(from) - 1, ms(to));
        let mut out = vec![];
        while let Some(f) = spec.next_after(t, 0).unwrap() {
            if f >= end {
                break;
            }
            out.push(Timestamp::from_millisecond(f).unwrap().to_string());
            t = f;
        }
        out
    }

    fn n(expr: &str, tz: &str, from: &str, to: &str) -> usize {
        fires(expr, tz, DayRule::Or, from, to).len()
    }

    #[test]
    fn new_york_spring_forward() {
        // 2027-03-14: 02:00 EST jumps to 03:00 EDT (07:00Z).
        let day = ("2027-03-14T05:00:00Z", "2027-03-15T04:00:00Z");
        assert_eq!(
            fires("30 2 * * *", "America/New_York", DayRule::Or, day.0, day.1),
            ["2027-03-14T07:00:00Z"]
        );
        assert_eq!(n("0 * * * *", "America/New_York", day.0, day.1), 23);
        assert_eq!(
            n(
                "@every 1h",
                "America/New_York",
                "2027-03-14T00:00:00Z",
                "2027-03-15T00:00:00Z"
            ),
            24
        );
        // Two skipped times collapse into one fire after the jump.
        assert_eq!(
            fires(
                "0,30 2 * * *",
                "America/New_York",
                DayRule::Or,
                day.0,
                day.1
            ),
            ["2027-03-14T07:00:00Z"]
        );
        // A wildcard minute in the skipped hour fires nothing there.
        assert_eq!(n("*/15 2 * * *", "America/New_York", day.0, day.1), 0);
    }

    #[test]
    fn new_york_fall_back() {
        // 2027-11-07: 02:00 EDT falls back to 01:00 EST (06:00Z).
        let day = ("2027-11-07T04:00:00Z", "2027-11-08T05:00:00Z");
        assert_eq!(
            fires("30 1 * * *", "America/New_York", DayRule::Or, day.0, day.1),
            ["2027-11-07T05:30:00Z"]
        );
        assert_eq!(n("0 * * * *", "America/New_York", day.0, day.1), 25);
        // Across the hour pair 01:00–02:00 EDT and EST: 8 fires.
        assert_eq!(
            n(
                "*/15 * * * *",
                "America/New_York",
                "2027-11-07T04:59:59Z",
                "2027-11-07T07:00:00Z"
            ),
            8
        );
        // A range in the hour field is fixed time: once.
        assert_eq!(
            fires(
                "15 1-2 * * *",
                "America/New_York",
                DayRule::Or,
                day.0,
                day.1
            ),
            ["2027-11-07T05:15:00Z", "2027-11-07T07:15:00Z"]
        );
    }

    #[test]
    fn berlin_and_lord_howe() {
        // Berlin 2027-03-28: 02:00 CET → 03:00 CEST (01:00Z).
        assert_eq!(
            fires(
                "30 2 * * *",
                "Europe/Berlin",
                DayRule::Or,
                "2027-03-27T23:00:00Z",
                "2027-03-28T22:00:00Z"
            ),
            ["2027-03-28T01:00:00Z"]
        );
        // 2027-10-31: 03:00 CEST → 02:00 CET (01:00Z).
        assert_eq!(
            fires(
                "30 2 * * *",
                "Europe/Berlin",
                DayRule::Or,
                "2027-10-30T22:00:00Z",
                "2027-10-31T23:00:00Z"
            ),
            ["2027-10-31T00:30:00Z"]
        );
        assert_eq!(
            n(
                "0 * * * *",
                "Europe/Berlin",
                "2027-10-30T22:00:00Z",
                "2027-10-31T23:00:00Z"
            ),
            25
        );
        // Lord Howe moves by 30 minutes: 02:00 → 02:30 on 2027-10-03.
        let f = fires(
            "15 2 * * *",
            "Australia/Lord_Howe",
            DayRule::Or,
            "2027-10-02T12:00:00Z",
            "2027-10-03T12:00:00Z",
        );
        assert_eq!(f.len(), 1, "{f:?}");
    }

    #[test]
    fn calendar_edges() {
        let y = ("2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z");
        // The 31st: only in the seven months that have one.
        assert_eq!(n("0 0 31 * *", "UTC", y.0, y.1), 7);
        // L: the last day of every month; W: the weekday nearest the 15th.
        assert_eq!(n("0 0 L * *", "UTC", y.0, y.1), 12);
        assert_eq!(
            fires(
                "0 0 15W * *",
                "UTC",
                DayRule::Or,
                "2027-05-01T00:00:00Z",
                "2027-06-01T00:00:00Z"
            ),
            ["2027-05-14T00:00:00Z"] // the 15th is a Saturday
        );
        // #: the second Tuesday.
        assert_eq!(
            fires(
                "0 9 * * TUE#2",
                "UTC",
                DayRule::Or,
                "2027-06-01T00:00:00Z",
                "2027-07-01T00:00:00Z"
            ),
            ["2027-06-08T09:00:00Z"]
        );
        // A leap day: once in four years.
        assert_eq!(
            fires(
                "0 0 29 2 *",
                "UTC",
                DayRule::Or,
                "2025-01-01T00:00:00Z",
                "2030-01-01T00:00:00Z"
            ),
            ["2028-02-29T00:00:00Z"]
        );
        // Names and 7 = Sunday; six fields with seconds.
        assert_eq!(n("0 12 * JAN SUN", "UTC", y.0, y.1), 5);
        assert_eq!(n("0 12 * 1 7", "UTC", y.0, y.1), 5);
        assert_eq!(
            n(
                "*/10 * * * * *",
                "UTC",
                "2027-01-01T00:00:00Z",
                "2027-01-01T00:01:00Z"
            ),
            6
        );
        assert_eq!(n("@weekly", "UTC", y.0, y.1), 52);
        assert_eq!(n("@midnight", "UTC", y.0, y.1), 365);
    }

    #[test]
    fn day_rules() {
        let y = ("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z");
        // Vixie OR: every 13th (12) and every Friday (52), Friday the 13ths once.
        let or = fires("0 9 13 * 5", "UTC", DayRule::Or, y.0, y.1);
        assert_eq!(or.len(), 12 + 52 - 3);
        // Honker's AND: Friday the 13th only (2026: February, March, November).
        assert_eq!(
            fires("0 9 13 * 5", "UTC", DayRule::And, y.0, y.1),
            [
                "2026-02-13T09:00:00Z",
                "2026-03-13T09:00:00Z",
                "2026-11-13T09:00:00Z"
            ]
        );
    }

    #[test]
    fn zones_do_not_depend_on_the_process() {
        // The zone comes from the schedule, never from TZ.
        let a = fires(
            "30 1 * * *",
            "Asia/Tokyo",
            DayRule::Or,
            "2027-01-01T00:00:00Z",
            "2027-01-03T00:00:00Z",
        );
        assert_eq!(a, ["2027-01-01T16:30:00Z", "2027-01-02T16:30:00Z"]);
    }

    #[test]
    fn every_is_anchored_and_dst_blind() {
        let s = Spec::parse("@every 90s", "Europe/Berlin", DayRule::Or).unwrap();
        assert_eq!(s.next_after(0, 0).unwrap(), Some(90_000));
        assert_eq!(s.next_after(90_000, 0).unwrap(), Some(180_000));
        assert_eq!(s.next_after(1_000, 500).unwrap(), Some(90_500));
        let s = Spec::parse("@every 1h30m", "UTC", DayRule::Or).unwrap();
        assert_eq!(s.next_after(0, 0).unwrap(), Some(5_400_000));
        assert_eq!(
            s.count_between(0, 5_400_000 * 3, 0, 100).unwrap(),
            (3, Some(16_200_000))
        );
    }

    #[test]
    fn bad_rules_name_the_field() {
        let bad = |e: &str| Spec::parse(e, "UTC", DayRule::Or).unwrap_err();
        let e = bad("0 25 * * *");
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(e.message().contains("field 2 (hour)"), "{}", e.message());
        assert!(e.message().contains("position 3"), "{}", e.message());
        // In honker's words, not the parser's (issue 53).
        assert!(
            e.message().ends_with(
                "it takes * or values 0-23, as a list (a,b), a range (a-b) or a step (*/n, a-b/n)"
            ),
            "{}",
            e.message()
        );
        assert!(bad("* * * *").message().contains("4 fields"));
        assert!(
            bad("0 0 * * MOO").message().contains("day of week"),
            "{}",
            bad("0 0 * * MOO").message()
        );
        assert!(bad("@fortnightly").message().contains("unknown macro"));
        assert!(bad("0 0 30 2 *").message().contains("matches no date"));
        for e in [
            "@every 0s",
            "@every",
            "@every 5",
            "@every s",
            "@every 5x",
            "@every 400d",
            "@every 500ms",
        ] {
            assert!(
                bad(e).message().contains("@every"),
                "{e}: {}",
                bad(e).message()
            );
        }
        let z = Spec::parse("* * * * *", "Mars/Olympus", DayRule::Or).unwrap_err();
        assert!(z.message().contains("unknown time zone"));
        assert_eq!(
            Spec::parse("* * * * *", "europe/berlin", DayRule::Or)
                .unwrap()
                .zone_name(),
            "Europe/Berlin"
        );
    }
}
