//! Reading a request line as JSON, strictly: an object that repeats a key
//! is refused, at any depth, with the path to the key.

use std::cell::RefCell;

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{FieldError, truncate_for_message};

/// Parses JSON refusing any object that repeats a key, at any depth.
/// `serde_json` keeps the last value silently, so `{"tool":"describe",
/// "tool":"run_shell"}` would otherwise be a `run_shell` call to whoever
/// reads the line with first-wins rules, and what the client logged would
/// not be what ran.
pub(super) fn parse_unique_keys(line: &[u8]) -> Result<Value, FieldError> {
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(line);
    let parsed = UniqueKeys {
        duplicate: &duplicate,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match (parsed, duplicate.into_inner()) {
        (Ok(v), _) => Ok(v),
        (Err(_), Some(path)) => Err(FieldError::new(
            dotted(&path),
            "duplicate key (each key may appear only once in an object)",
        )),
        (Err(e), None) => Err(FieldError::new("request", format!("not valid JSON ({e})"))),
    }
}

/// The path of the offending key, innermost first as it was collected.
fn dotted(reversed: &[String]) -> String {
    let joined: Vec<String> = reversed
        .iter()
        .rev()
        .map(|k| truncate_for_message(k))
        .collect();
    joined.join(".")
}

/// Builds a `Value` like `serde_json` does, but fails on a repeated key and
/// records the path to it (keys pushed innermost first while the error
/// travels out).
struct UniqueKeys<'a> {
    duplicate: &'a RefCell<Option<Vec<String>>>,
}

impl<'de> DeserializeSeed<'de> for UniqueKeys<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let index = items.len();
            match seq.next_element_seed(UniqueKeys {
                duplicate: self.duplicate,
            }) {
                Ok(Some(v)) => items.push(v),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    if let Some(path) = self.duplicate.borrow_mut().as_mut() {
                        path.push(index.to_string());
                    }
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut obj = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if obj.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(vec![key.clone()]);
                return Err(A::Error::custom(format_args!("duplicate key {key:?}")));
            }
            match map.next_value_seed(UniqueKeys {
                duplicate: self.duplicate,
            }) {
                Ok(v) => {
                    obj.insert(key, v);
                }
                Err(e) => {
                    if let Some(path) = self.duplicate.borrow_mut().as_mut() {
                        path.push(key);
                    }
                    return Err(e);
                }
            }
        }
        Ok(Value::Object(obj))
    }
}
