//! Text out of a stream of tokens whose bytes may split a character.
use super::Tokenizer;

/// Turns tokens into text as they come: bytes of a character split across
/// tokens wait for the rest; invalid bytes become U+FFFD.
#[derive(Default)]
pub struct TextStream {
    pending: Vec<u8>,
    text: String,
}

impl TextStream {
    /// An empty stream.
    pub fn new() -> TextStream {
        TextStream::default()
    }

    /// The text `id` completes (empty while a character is incomplete).
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> &str {
        self.text.clear();
        tokenizer.decode_into(id, &mut self.pending);
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    self.text.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    self.text.push_str(
                        std::str::from_utf8(&self.pending[start..start + valid]).unwrap_or(""),
                    );
                    start += valid;
                    match e.error_len() {
                        // Invalid bytes: one replacement, then go on.
                        Some(n) => {
                            self.text.push(char::REPLACEMENT_CHARACTER);
                            start += n;
                        }
                        // An incomplete character at the end: wait.
                        None => break,
                    }
                }
            }
        }
        self.pending.drain(..start);
        &self.text
    }
}
