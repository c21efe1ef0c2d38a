-- An IMAP mailbox's password is a third-party secret: it is stored sealed (AES-256-GCM, the one
-- mechanism of decision 036), never as given. The service has never been deployed; a mailbox
-- written before this (development data) fails its next poll saying to set the password again.
alter table inbox_mailboxes rename column password to password_sealed;
