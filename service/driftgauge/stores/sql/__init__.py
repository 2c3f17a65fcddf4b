"""What SQL engines share: the digest queries written once, over a dialect's spellings."""
