//! Calendar arithmetic without a date crate: the proleptic Gregorian date
//! of a day count since the Unix epoch (what the audit records' RFC 3339
//! times and the web console's dates are written from).

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub fn civil_date(days: u64) -> (u64, u64, u64) {
    // Count in 400-year eras starting on 0000-03-01, so leap days fall at
    // the end of each year.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_counts_read_as_their_dates_across_leap_years_and_centuries() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(20_790), (2026, 12, 3));
    }
}
