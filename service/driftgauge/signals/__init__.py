"""Source-side signals: vocabulary the reader cannot match, and volume outside its band."""
