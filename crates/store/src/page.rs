//! Keyset pagination: a page size and an opaque cursor naming the last item seen.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// Which page of a list to read: at most `limit` items after the cursor `after`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Page {
    /// How many items, 1..=200 (default 50).
    pub limit: u32,
    /// The `next` value of the previous page; `None` for the first page.
    pub after: Option<String>,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            limit: Page::DEFAULT_LIMIT,
            after: None,
        }
    }
}

/// One page of a list, and the cursor of the next page if there is one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paged<T> {
    /// The items, in the list's order.
    pub items: Vec<T>,
    /// Pass as [`Page::after`] to read on; `None` on the last page.
    pub next: Option<String>,
}

impl Page {
    /// The page size when none is given.
    pub const DEFAULT_LIMIT: u32 = 50;
    /// The largest page size.
    pub const MAX_LIMIT: u32 = 200;

    /// The first page of `limit` items.
    pub fn first(limit: u32) -> Page {
        Page { limit, after: None }
    }

    /// The page of `limit` items after the cursor `after`.
    pub fn after(limit: u32, after: impl Into<String>) -> Page {
        Page {
            limit,
            after: Some(after.into()),
        }
    }

    /// Checks the limit, and returns it with one more row to fetch (to learn if a next page exists).
    pub(crate) fn fetch_limit(&self) -> Result<i64, StoreError> {
        if !(1..=Page::MAX_LIMIT).contains(&self.limit) {
            return Err(StoreError::Invalid(format!(
                "page limit {} is out of range; ask for 1 to {} items",
                self.limit,
                Page::MAX_LIMIT
            )));
        }
        Ok(i64::from(self.limit) + 1)
    }

    /// The decoded cursor: the key parts of the last item of the previous page.
    pub(crate) fn cursor(&self, parts: usize) -> Result<Option<Vec<String>>, StoreError> {
        let Some(after) = &self.after else {
            return Ok(None);
        };
        let bad = || {
            StoreError::Invalid(
                "the page cursor `after` is not one this server returned; pass the `next` value \
                 of the previous page, or omit it for the first page"
                    .to_owned(),
            )
        };
        let bytes = URL_SAFE_NO_PAD.decode(after).map_err(|_| bad())?;
        let keys: Vec<String> = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if keys.len() != parts {
            return Err(bad());
        }
        Ok(Some(keys))
    }
}

/// Encodes the key parts of an item as a cursor.
pub(crate) fn encode_cursor(parts: &[&str]) -> String {
    // A JSON array of strings cannot fail to serialise.
    let json = serde_json::to_vec(parts).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// Cuts the extra row fetched by [`Page::fetch_limit`] and makes the next cursor from the last item.
pub(crate) fn paginate<T>(mut items: Vec<T>, page: &Page, key: impl Fn(&T) -> String) -> Paged<T> {
    let limit = page.limit as usize;
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(key)
    } else {
        None
    };
    Paged { items, next }
}
