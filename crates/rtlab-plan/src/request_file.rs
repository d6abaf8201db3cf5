//! The reservation request file read by `rtlab plan`: one request per line, `OWNER AMOUNT/PERIOD`
//! with units (`decoder 1ms/16ms`, `mixer 500us/10ms`, `tid:4242 2ms/20ms`), `#` starting a comment,
//! blank lines ignored. It lives here, beside the planner, so the fuzz target and the CLI parse it
//! the same way; errors carry the 1-based line number.

use crate::owner::Owner;
use rtlab_core::{parse_duration, Nanos};

/// One line of a request file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// 1-based line number in the file.
    pub line: usize,
    pub owner: Owner,
    pub amount: Nanos,
    pub period: Nanos,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {message}")]
pub struct RequestFileError {
    pub line: usize,
    pub message: String,
}

/// Parses a whole request file; the first malformed line is the error.
pub fn parse_requests(text: &str) -> Result<Vec<Request>, RequestFileError> {
    let mut requests = Vec::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw_line.split('#').next().unwrap_or_default().trim();
        if content.is_empty() {
            continue;
        }
        let error = |message: String| RequestFileError { line, message };
        let mut fields = content.split_whitespace();
        let (Some(owner_text), Some(rate_text)) = (fields.next(), fields.next()) else {
            return Err(error(format!(
                "expected 'OWNER AMOUNT/PERIOD' (e.g. 'decoder 1ms/16ms'), found '{content}'"
            )));
        };
        if let Some(extra) = fields.next() {
            return Err(error(format!("unexpected '{extra}' after the rate")));
        }
        let owner =
            Owner::parse(owner_text).map_err(|owner_error| error(owner_error.to_string()))?;
        let Some((amount_text, period_text)) = rate_text.split_once('/') else {
            return Err(error(format!(
                "rate '{rate_text}' has no '/' (expected AMOUNT/PERIOD, e.g. 1ms/16ms)"
            )));
        };
        let amount = parse_duration(amount_text)
            .map_err(|unit_error| error(format!("amount: {unit_error}")))?;
        let period = parse_duration(period_text)
            .map_err(|unit_error| error(format!("period: {unit_error}")))?;
        if amount.0 == 0 {
            return Err(error("amount must be positive".to_owned()));
        }
        if period.0 == 0 {
            return Err(error("period must be positive".to_owned()));
        }
        if amount > period {
            return Err(error(format!(
                "amount {amount} is longer than period {period}"
            )));
        }
        requests.push(Request {
            line,
            owner,
            amount,
            period,
        });
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requests_comments_and_blank_lines() {
        let text =
            "# audio\ndecoder 1ms/16ms\n\nmixer 500us/10ms   # kernel mixer\ntid:77 2ms/20ms\n";
        let requests = parse_requests(text).expect("valid");
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0].line, 2);
        assert_eq!(requests[1].amount, Nanos::from_micros(500));
        assert_eq!(requests[2].owner, Owner::Thread(77));
    }

    #[test]
    fn names_the_line_of_the_first_bad_request() {
        let error = parse_requests("a 1ms/2ms\nb 1ms\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(
            error
                .to_string()
                .starts_with("line 2: rate '1ms' has no '/'"),
            "{error}"
        );
    }
}
