DELETE FROM opsq.instances WHERE id = @id
