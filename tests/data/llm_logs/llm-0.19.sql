PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE IF NOT EXISTS "_llm_migrations" (
   "name" TEXT PRIMARY KEY,
   "applied_at" TEXT
);
INSERT INTO _llm_migrations VALUES('m001_initial','2026-12-01 01:41:33.776060');
INSERT INTO _llm_migrations VALUES('m002_id_primary_key','2026-12-01 01:41:33.785046');
INSERT INTO _llm_migrations VALUES('m003_chat_id_foreign_key','2026-12-01 01:41:33.807352');
INSERT INTO _llm_migrations VALUES('m004_column_order','2026-12-01 01:41:33.817174');
INSERT INTO _llm_migrations VALUES('m004_drop_provider','2026-12-01 01:41:33.828345');
INSERT INTO _llm_migrations VALUES('m005_debug','2026-12-01 01:41:33.834698');
INSERT INTO _llm_migrations VALUES('m006_new_logs_table','2026-12-01 01:41:33.851486');
INSERT INTO _llm_migrations VALUES('m007_finish_logs_table','2026-12-01 01:41:33.865182');
INSERT INTO _llm_migrations VALUES('m008_reply_to_id_foreign_key','2026-12-01 01:41:33.880903');
INSERT INTO _llm_migrations VALUES('m008_fix_column_order_in_logs','2026-12-01 01:41:33.893720');
INSERT INTO _llm_migrations VALUES('m009_delete_logs_table_if_empty','2026-12-01 01:41:33.898169');
INSERT INTO _llm_migrations VALUES('m010_create_new_log_tables','2026-12-01 01:41:33.905559');
INSERT INTO _llm_migrations VALUES('m011_fts_for_responses','2026-12-01 01:41:33.916344');
INSERT INTO _llm_migrations VALUES('m012_attachments_tables','2026-12-01 01:41:33.923924');
INSERT INTO _llm_migrations VALUES('m013_usage','2026-12-01 01:41:33.932880');
CREATE TABLE IF NOT EXISTS "conversations" (
   "id" TEXT PRIMARY KEY,
   "name" TEXT,
   "model" TEXT
);
INSERT INTO conversations VALUES('01m8qm7b3e9se0hpyrs69vsw12','Hello there','canned');
CREATE TABLE IF NOT EXISTS "responses" (
   "id" TEXT PRIMARY KEY,
   "model" TEXT,
   "prompt" TEXT,
   "system" TEXT,
   "prompt_json" TEXT,
   "options_json" TEXT,
   "response" TEXT,
   "response_json" TEXT,
   "conversation_id" TEXT REFERENCES "conversations"("id"),
   "duration_ms" INTEGER,
   "datetime_utc" TEXT
, "input_tokens" INTEGER, "output_tokens" INTEGER, "token_details" TEXT);
INSERT INTO responses VALUES('01m8qm7b3h5n2zcnjejs5qc2tc','canned','Hello there','You are terse.',NULL,'{}','Canned answer to: Hello there',NULL,'01m8qm7b3e9se0hpyrs69vsw12',0,'2026-12-01T01:41:33.935224',12,5,NULL);
INSERT INTO responses VALUES('01m8qm7b3nj22v2gv74qhqxr8j','canned','And the weather?','You are terse.',NULL,'{}','Canned answer to: And the weather?',NULL,'01m8qm7b3e9se0hpyrs69vsw12',0,'2026-12-01T01:41:33.940566',13,6,NULL);
PRAGMA writable_schema=ON;
INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)VALUES('table','responses_fts','responses_fts',0,'CREATE VIRTUAL TABLE "responses_fts" USING FTS5 (
    "prompt", "response",
    content="responses"
)');
CREATE TABLE IF NOT EXISTS 'responses_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
INSERT INTO responses_fts_data VALUES(1,X'02050b');
INSERT INTO responses_fts_data VALUES(10,X'000000000102020002010101020101');
INSERT INTO responses_fts_data VALUES(137438953473,X'000000400730616e737765720106010103010663616e6e65640106010102010568656c6c6f0108020101050105746865726501080301010602016f0106010104040d0d0d0d');
INSERT INTO responses_fts_data VALUES(274877906945,X'000000490430616e640208020101050304737765720206010103010663616e6e65640206010102010374686502080301010602016f0206010104010777656174686572020804010107040b0b0d0b08');
CREATE TABLE IF NOT EXISTS 'responses_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
INSERT INTO responses_fts_idx VALUES(1,X'',2);
INSERT INTO responses_fts_idx VALUES(2,X'',2);
CREATE TABLE IF NOT EXISTS 'responses_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
INSERT INTO responses_fts_docsize VALUES(1,X'0205');
INSERT INTO responses_fts_docsize VALUES(2,X'0306');
CREATE TABLE IF NOT EXISTS 'responses_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO responses_fts_config VALUES('version',4);
CREATE TABLE IF NOT EXISTS "attachments" (
   "id" TEXT PRIMARY KEY,
   "type" TEXT,
   "path" TEXT,
   "url" TEXT,
   "content" BLOB
);
CREATE TABLE IF NOT EXISTS "prompt_attachments" (
   "response_id" TEXT REFERENCES "responses"("id"),
   "attachment_id" TEXT REFERENCES "attachments"("id"),
   "order" INTEGER,
   PRIMARY KEY ("response_id", "attachment_id")
);
CREATE TRIGGER "responses_ai" AFTER INSERT ON "responses" BEGIN
  INSERT INTO "responses_fts" (rowid, "prompt", "response") VALUES (new.rowid, new."prompt", new."response");
END;
CREATE TRIGGER "responses_ad" AFTER DELETE ON "responses" BEGIN
  INSERT INTO "responses_fts" ("responses_fts", rowid, "prompt", "response") VALUES('delete', old.rowid, old."prompt", old."response");
END;
CREATE TRIGGER "responses_au" AFTER UPDATE ON "responses" BEGIN
  INSERT INTO "responses_fts" ("responses_fts", rowid, "prompt", "response") VALUES('delete', old.rowid, old."prompt", old."response");
  INSERT INTO "responses_fts" (rowid, "prompt", "response") VALUES (new.rowid, new."prompt", new."response");
END;
PRAGMA writable_schema=OFF;
COMMIT;
