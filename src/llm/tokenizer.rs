//! SentencePiece tokenization as llama.cpp's `llama` tokenizer does it,
//! from the vocabulary the compiler carries with a GGUF decoder.
//!
//! Encoding: text between special tokens has its spaces replaced by `▁`
//! (and one prepended when the model asks for a space prefix), is split
//! into characters, and adjacent pieces are merged, best-scoring merge
//! first (the leftmost on a tie), as long as the merged text is a token;
//! a piece that is no token at the end becomes its bytes' `<0xXX>`
//! tokens. Special tokens (user-defined ones always, control ones when
//! asked) are matched in the text first, longest first.
use std::collections::{BinaryHeap, HashMap};

use super::LlmError;

/// A token's kind, as GGUF records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// A piece of text.
    Normal,
    /// The unknown token.
    Unknown,
    /// A control token (`<bos>`, `<end_of_turn>`): no text of its own.
    Control,
    /// A user-defined token, matched as a whole in any text.
    UserDefined,
    /// Never produced.
    Unused,
    /// One byte, `<0xXX>`.
    Byte,
}

struct Token {
    text: Box<str>,
    score: f32,
    kind: TokenKind,
}

/// A SentencePiece vocabulary and its rules (see the module docs).
pub struct Tokenizer {
    tokens: Vec<Token>,
    ids: HashMap<Box<str>, u32>,
    /// Special tokens, longest text first.
    specials: Vec<u32>,
    byte_tokens: [Option<u32>; 256],
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    add_bos: bool,
    add_space_prefix: bool,
}

/// Reads the compiler's tokenizer blob field by field, every length
/// checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], LlmError> {
        if self.0.len() < n {
            return Err(LlmError::Tokenizer("the tokenizer data are truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> Result<u32, LlmError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn f32(&mut self) -> Result<f32, LlmError> {
        let b = self.take(4)?;
        Ok(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn id(&mut self, count: u32) -> Result<Option<u32>, LlmError> {
        let v = self.u32()? as i32;
        match v {
            -1 => Ok(None),
            v if v >= 0 && (v as u32) < count => Ok(Some(v as u32)),
            _ => Err(LlmError::Tokenizer("a special token id is out of range")),
        }
    }
}

impl Tokenizer {
    /// Reads the compiler's tokenizer blob (`LELETOK1`, see
    /// `lele_build::gguf::tokenizer_blob`).
    pub fn from_bytes(blob: &[u8]) -> Result<Tokenizer, LlmError> {
        let mut r = Reader(blob);
        if r.take(8)? != crate::kernels::rt::TOKENIZER_MAGIC {
            return Err(LlmError::Tokenizer("not a lele tokenizer"));
        }
        if r.u32()? != 1 {
            return Err(LlmError::Tokenizer("not a SentencePiece tokenizer"));
        }
        let count = r.u32()?;
        let (bos, eos, _unknown, eot) = (r.id(count)?, r.id(count)?, r.id(count)?, r.id(count)?);
        let flags = r.u32()?;
        // Each token takes at least 9 bytes: a count past that is a lie.
        if count as usize > r.0.len() / 9 {
            return Err(LlmError::Tokenizer("the tokenizer data are truncated"));
        }
        let mut tokens = Vec::with_capacity(count as usize);
        let mut ids = HashMap::with_capacity(count as usize);
        let mut byte_tokens = [None; 256];
        for id in 0..count {
            let score = r.f32()?;
            let kind = match r.take(1)?[0] {
                1 => TokenKind::Normal,
                2 => TokenKind::Unknown,
                3 => TokenKind::Control,
                4 => TokenKind::UserDefined,
                5 => TokenKind::Unused,
                6 => TokenKind::Byte,
                _ => return Err(LlmError::Tokenizer("a token has an unknown type")),
            };
            let len = r.u32()? as usize;
            let text = std::str::from_utf8(r.take(len)?)
                .map_err(|_| LlmError::Tokenizer("a token is not UTF-8"))?;
            if kind == TokenKind::Byte
                && let Some(b) = parse_byte_token(text)
            {
                byte_tokens[usize::from(b)] = Some(id);
            }
            let text: Box<str> = text.into();
            // The last of equal texts wins, as in llama.cpp's map.
            ids.insert(text.clone(), id);
            tokens.push(Token { text, score, kind });
        }
        let mut specials: Vec<u32> = (0..count)
            .filter(|&i| {
                let t = &tokens[i as usize];
                matches!(t.kind, TokenKind::Control | TokenKind::UserDefined) && !t.text.is_empty()
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].text.len()));
        Ok(Tokenizer {
            tokens,
            ids,
            specials,
            byte_tokens,
            bos,
            eos,
            eot,
            add_bos: flags & 1 != 0,
            add_space_prefix: flags & 2 != 0,
        })
    }

    /// Tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The beginning-of-sequence token, if the model has one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The id of the token whose text is `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// Whether `id` ends a generation: the end-of-sequence or end-of-turn
    /// token, or a control token spelled as one of the common ends of a
    /// turn (llama.cpp recognizes them by their text too).
    pub fn is_end(&self, id: u32) -> bool {
        if Some(id) == self.eos || Some(id) == self.eot {
            return true;
        }
        self.tokens.get(id as usize).is_some_and(|t| {
            t.kind == TokenKind::Control
                && matches!(
                    &*t.text,
                    "<end_of_turn>" | "<|eot_id|>" | "<|im_end|>" | "<|end|>" | "<|endoftext|>"
                )
        })
    }

    /// The tokens of `text`, after the BOS token when the model adds one
    /// and `add_bos` asks for it. With `special`, control tokens spelled in
    /// the text (`<start_of_turn>`) are those tokens; without it they are
    /// plain text (user-defined tokens always are matched).
    pub fn encode(&self, text: &str, add_bos: bool, special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if add_bos && self.add_bos {
            out.extend(self.bos);
        }
        // Special tokens split the text, longest first (llama.cpp's
        // partition): each token claims its occurrences in the pieces of
        // text the longer ones left.
        enum Fragment<'t> {
            Text(&'t str),
            Token(u32),
        }
        let mut fragments = vec![Fragment::Text(text)];
        for &id in &self.specials {
            let token = &self.tokens[id as usize];
            if !special && token.kind != TokenKind::UserDefined {
                continue;
            }
            if !fragments
                .iter()
                .any(|f| matches!(f, Fragment::Text(t) if t.contains(&*token.text)))
            {
                continue;
            }
            let mut split = Vec::with_capacity(fragments.len() + 2);
            for f in fragments {
                let Fragment::Text(mut rest) = f else {
                    split.push(f);
                    continue;
                };
                while let Some(at) = rest.find(&*token.text) {
                    if at > 0 {
                        split.push(Fragment::Text(&rest[..at]));
                    }
                    split.push(Fragment::Token(id));
                    rest = &rest[at + token.text.len()..];
                }
                if !rest.is_empty() {
                    split.push(Fragment::Text(rest));
                }
            }
            fragments = split;
        }
        let mut first_text = true;
        for f in fragments {
            match f {
                Fragment::Token(id) => out.push(id),
                Fragment::Text(t) => {
                    self.encode_plain(t, first_text && self.add_space_prefix, &mut out);
                    first_text = false;
                }
            }
        }
        out
    }

    /// One stretch of text without special tokens.
    fn encode_plain(&self, text: &str, space_prefix: bool, out: &mut Vec<u32>) {
        let mut escaped = String::with_capacity(text.len() + 3);
        if space_prefix {
            escaped.push('▁');
        }
        for c in text.chars() {
            escaped.push(if c == ' ' { '▁' } else { c });
        }
        // The pieces, as byte ranges of `escaped` in a linked list.
        struct Piece {
            start: usize,
            len: usize,
            prev: Option<usize>,
            next: Option<usize>,
        }
        let mut pieces: Vec<Piece> = Vec::new();
        for (start, c) in escaped.char_indices() {
            let i = pieces.len();
            pieces.push(Piece {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if i > 0 {
                pieces[i - 1].next = Some(i);
            }
        }
        // Candidate merges: best score first, then leftmost.
        struct Merge {
            score: f32,
            left: usize,
            right: usize,
            len: usize,
        }
        // Equality as the order sees it (scores by their total order).
        impl PartialEq for Merge {
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other) == std::cmp::Ordering::Equal
            }
        }
        impl Eq for Merge {}
        impl PartialOrd for Merge {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for Merge {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.score
                    .total_cmp(&other.score)
                    .then(other.left.cmp(&self.left))
            }
        }
        let mut queue = BinaryHeap::new();
        let candidate = |pieces: &[Piece], left: usize, right: usize| -> Option<Merge> {
            let (l, r) = (&pieces[left], &pieces[right]);
            let text = &escaped[l.start..r.start + r.len];
            let id = *self.ids.get(text)?;
            Some(Merge {
                score: self.tokens[id as usize].score,
                left,
                right,
                len: text.len(),
            })
        };
        for i in 1..pieces.len() {
            queue.extend(candidate(&pieces, i - 1, i));
        }
        while let Some(m) = queue.pop() {
            let (l, r) = (&pieces[m.left], &pieces[m.right]);
            // Stale: one side has been merged away or grown since.
            if l.len == 0 || r.len == 0 || l.len + r.len != m.len {
                continue;
            }
            let next = r.next;
            pieces[m.left].len = m.len;
            pieces[m.left].next = next;
            pieces[m.right].len = 0;
            if let Some(n) = next {
                pieces[n].prev = Some(m.left);
            }
            if let Some(p) = pieces[m.left].prev {
                queue.extend(candidate(&pieces, p, m.left));
            }
            if let Some(n) = next {
                queue.extend(candidate(&pieces, m.left, n));
            }
        }
        let mut at = (!pieces.is_empty()).then_some(0);
        while let Some(i) = at {
            let p = &pieces[i];
            let text = &escaped[p.start..p.start + p.len];
            match self.ids.get(text) {
                Some(&id) => out.push(id),
                None => out.extend(
                    text.bytes()
                        .filter_map(|b| self.byte_tokens[usize::from(b)]),
                ),
            }
            at = p.next;
        }
    }

    /// The bytes token `id` stands for, appended to `out`: a piece's text
    /// with `▁` as a space, a byte token's byte, a user-defined token's
    /// text; nothing for control and unknown tokens. Pieces of a
    /// character may come in several tokens, so decode a stream of them
    /// into bytes and convert complete UTF-8 (see [`super::TextStream`]).
    pub fn decode_into(&self, id: u32, out: &mut Vec<u8>) {
        let Some(t) = self.tokens.get(id as usize) else {
            return;
        };
        match t.kind {
            TokenKind::Normal | TokenKind::UserDefined => {
                for c in t.text.chars() {
                    if c == '▁' {
                        out.push(b' ');
                    } else {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
            TokenKind::Byte => out.extend(parse_byte_token(&t.text)),
            TokenKind::Control | TokenKind::Unknown | TokenKind::Unused => {}
        }
    }

    /// The text of `ids` (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            self.decode_into(id, &mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The byte of a `<0xXX>` token.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}
