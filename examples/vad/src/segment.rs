//! Speech probabilities → speech segments, with the rules of the reference
//! Silero pipeline.
//!
//! A segment starts at the first chunk whose probability reaches
//! `threshold`; it ends at the first chunk below `threshold - 0.15` once the
//! probability has stayed below that for `min_silence_ms`. Segments shorter
//! than `min_speech_ms` are dropped, segments longer than `max_speech_s`
//! are split (at the last short pause when there was one), and every
//! segment is padded by `speech_pad_ms` on both sides (half the gap when
//! two segments are closer than twice the padding).

/// Tunables of the segmentation (the reference pipeline's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct VadParams {
    /// Probability at which speech starts.
    pub threshold: f32,
    /// Probability below which speech may end (default `threshold - 0.15`).
    pub neg_threshold: Option<f32>,
    /// Shorter segments are dropped.
    pub min_speech_ms: u32,
    /// Silence needed to end a segment.
    pub min_silence_ms: u32,
    /// Padding added on both sides of a segment.
    pub speech_pad_ms: u32,
    /// Longer segments are split (default: no limit).
    pub max_speech_s: f32,
}

impl Default for VadParams {
    fn default() -> Self {
        Self {
            threshold: 0.5,
            neg_threshold: None,
            min_speech_ms: 250,
            min_silence_ms: 100,
            speech_pad_ms: 30,
            max_speech_s: f32::INFINITY,
        }
    }
}

/// A stretch of speech, in samples (`start..end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First sample.
    pub start: usize,
    /// One past the last sample.
    pub end: usize,
}

impl Segment {
    /// Start in seconds at `rate` Hz.
    pub fn start_s(&self, rate: u32) -> f64 {
        self.start as f64 / f64::from(rate)
    }

    /// End in seconds at `rate` Hz.
    pub fn end_s(&self, rate: u32) -> f64 {
        self.end as f64 / f64::from(rate)
    }
}

/// Consumes one probability per chunk, in order.
#[derive(Clone, Debug)]
pub struct Segmenter {
    threshold: f32,
    neg_threshold: f32,
    window: usize,
    min_speech: usize,
    min_silence: usize,
    /// Silence after which a long segment may later be split there.
    min_silence_at_max_speech: usize,
    pad: usize,
    max_speech: f64,
    chunk: usize,
    triggered: bool,
    start: usize,
    temp_end: usize,
    prev_end: usize,
    next_start: usize,
    raw: Vec<Segment>,
}

impl Segmenter {
    /// A segmenter for chunks of `window` samples at `rate` Hz.
    pub fn new(params: &VadParams, rate: u32, window: usize) -> Self {
        let samples = |ms: u32| (u64::from(rate) * u64::from(ms) / 1000) as usize;
        let pad = samples(params.speech_pad_ms);
        Self {
            threshold: params.threshold,
            neg_threshold: params
                .neg_threshold
                .unwrap_or((params.threshold - 0.15).max(0.01)),
            window,
            min_speech: samples(params.min_speech_ms),
            min_silence: samples(params.min_silence_ms),
            min_silence_at_max_speech: samples(98),
            pad,
            max_speech: f64::from(rate) * f64::from(params.max_speech_s)
                - window as f64
                - 2.0 * pad as f64,
            chunk: 0,
            triggered: false,
            start: 0,
            temp_end: 0,
            prev_end: 0,
            next_start: 0,
            raw: Vec::new(),
        }
    }

    /// Whether the last chunk was inside a segment.
    pub fn in_speech(&self) -> bool {
        self.triggered
    }

    /// Unpadded segments closed so far.
    pub fn closed(&self) -> &[Segment] {
        &self.raw
    }

    fn close(&mut self, end: usize) {
        if end - self.start > self.min_speech {
            self.raw.push(Segment {
                start: self.start,
                end,
            });
        }
    }

    /// Feeds the probability of the next chunk.
    pub fn push(&mut self, prob: f32) {
        let pos = self.chunk * self.window;
        self.chunk += 1;
        if prob >= self.threshold && self.temp_end != 0 {
            self.temp_end = 0;
            if self.next_start < self.prev_end {
                self.next_start = pos;
            }
        }
        if prob >= self.threshold && !self.triggered {
            self.triggered = true;
            self.start = pos;
            return;
        }
        if self.triggered && (pos - self.start) as f64 > self.max_speech {
            if self.prev_end != 0 {
                let (end, next) = (self.prev_end, self.next_start);
                self.raw.push(Segment {
                    start: self.start,
                    end,
                });
                if next < end {
                    self.triggered = false;
                } else {
                    self.start = next;
                }
            } else {
                self.raw.push(Segment {
                    start: self.start,
                    end: pos,
                });
                self.triggered = false;
            }
            self.prev_end = 0;
            self.next_start = 0;
            self.temp_end = 0;
            return;
        }
        if prob < self.neg_threshold && self.triggered {
            if self.temp_end == 0 {
                self.temp_end = pos;
            }
            if pos - self.temp_end > self.min_silence_at_max_speech {
                self.prev_end = self.temp_end;
            }
            if pos - self.temp_end < self.min_silence {
                return;
            }
            let end = self.temp_end;
            self.close(end);
            self.prev_end = 0;
            self.next_start = 0;
            self.temp_end = 0;
            self.triggered = false;
        }
    }

    /// Closes an open segment at the end of the audio (`total` samples) and
    /// returns the padded segments.
    pub fn finish(mut self, total: usize) -> Vec<Segment> {
        if self.triggered && total.saturating_sub(self.start) > self.min_speech {
            self.raw.push(Segment {
                start: self.start,
                end: total,
            });
        }
        let pad = self.pad;
        let mut segs = self.raw;
        if let Some(first) = segs.first_mut() {
            first.start = first.start.saturating_sub(pad);
        }
        for k in 0..segs.len() {
            if k + 1 < segs.len() {
                let gap = segs[k + 1].start.saturating_sub(segs[k].end);
                if gap < 2 * pad {
                    segs[k].end += gap / 2;
                    segs[k + 1].start = segs[k + 1].start.saturating_sub(gap / 2);
                } else {
                    segs[k].end = (segs[k].end + pad).min(total);
                    segs[k + 1].start = segs[k + 1].start.saturating_sub(pad);
                }
            } else {
                segs[k].end = (segs[k].end + pad).min(total);
            }
        }
        segs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(probs: &[f32], total: usize) -> Vec<Segment> {
        // 16 kHz, 512-sample chunks: pad 480, min speech 4000, min silence 1600.
        let mut s = Segmenter::new(&VadParams::default(), 16_000, 512);
        probs.iter().for_each(|&p| s.push(p));
        s.finish(total)
    }

    #[test]
    fn one_segment_with_padding() {
        let mut p = vec![0.0; 40];
        p[10..30].fill(0.9);
        // starts at chunk 10, ends at chunk 30 once 1600 samples (4 chunks) of silence passed
        assert_eq!(
            run(&p, 40 * 512),
            [Segment {
                start: 10 * 512 - 480,
                end: 30 * 512 + 480
            }]
        );
    }

    #[test]
    fn short_pause_does_not_split_and_short_blip_is_dropped() {
        let mut p = vec![0.0; 80];
        p[10..20].fill(0.9);
        p[22..30].fill(0.9); // 2-chunk pause < min silence
        p[50..52].fill(0.9); // 1024 samples < min speech
        let segs = run(&p, 80 * 512);
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].end, 30 * 512 + 480);
    }

    #[test]
    fn hysteresis_keeps_speech_between_thresholds() {
        let mut p = vec![0.0; 40];
        p[5..10].fill(0.9);
        p[10..25].fill(0.4); // below threshold, above neg threshold
        assert_eq!(run(&p, 40 * 512)[0].end, 25 * 512 + 480);
    }

    #[test]
    fn open_segment_ends_with_the_audio() {
        let mut p = vec![0.0; 20];
        p[5..].fill(0.9);
        assert_eq!(run(&p, 20 * 512 - 100)[0].end, 20 * 512 - 100);
    }

    #[test]
    fn separate_segments_are_padded_on_both_sides() {
        let mut p = vec![0.0; 60];
        p[5..15].fill(0.9);
        p[20..30].fill(0.9); // a gap of 2560 samples, more than twice the padding
        let segs = run(&p, 60 * 512);
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[0].end, 15 * 512 + 480);
        assert_eq!(segs[1].start, 20 * 512 - 480);
    }
}
